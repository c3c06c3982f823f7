#!/usr/bin/env node
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Header } from "../../protocol/headers.js";
import { freePort } from "../free-port.js";
import { type LocalStack, startLocalStack } from "../local-stack.js";

/*
 * The edge's own overhead under `wrangler dev`: the local stack with zero-model-time
 * engines (timeScale Infinity), N closed-loop clients for a few seconds per phase.
 * Phase "new-program": every call starts a program (no x-agentix-program header).
 * Phase "existing-program": each client keeps calling its own program.
 * Phase "new, no inference": as new-program with the tenant's program inference off,
 * so the difference is what recognising a header-less call by its conversation costs
 * (one ProgramIndex round trip before the call, one after it).
 * The dev tenant's limits are lifted in this throwaway state, so nothing is throttled.
 *
 * Each phase runs on two stacks started side by side, in one sitting, interleaved A B B A
 * (each side twice for half the phase's time): the baseline (the call path before issue 14:
 * EDGE_BASELINE_HOT_PATH=1, the key read from D1 on every request, admission then begin,
 * a usage row written to D1 at every settle) and on the hot path (the limiter verifies the
 * key and admits; the begin runs alongside; usage rows batched). The edge counts every
 * call's Durable Object calls, their sequential rounds and its D1 queries until it is
 * forwarded (COUNT_IO=1, the x-agentix-io-counts header), and the D1 queries of the whole
 * isolate, the objects' ledger batches included (/debug/io-totals, read after the batches
 * of the phase are due).
 */

const USAGE = `edge-load [options]   calls/s and latency of the edge under wrangler dev

  --workers N      concurrent clients (default 24)
  --seconds S      seconds per phase and side, run in two halves (default 8)
  --engines N      simulated engines (default 2)
  --state-base DIR where the throwaway state directory goes (default the OS temp dir)
  --shards N       instead: one tenant's calls/s with a one-object limiter vs N limiter shards (2..64),
                   on one hot-path stack, existing-program calls, A B B A
  --ledger         instead: D1 queries per call with each program batching its own usage rows
                   (EDGE_BASELINE_PROGRAM_LEDGER=1) vs the tenant's UsageLedger batching them all,
                   new-program and existing-program calls, two hot-path stacks, A B B A`;

interface Options {
  workers: number;
  seconds: number;
  engines: number;
  stateBase: string;
  /** Set: the sharded-limiter comparison (1 vs this many shards) instead of the phases. */
  shards: number | undefined;
  /** The ledger comparison (per program vs per tenant) instead of the phases. */
  ledger: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      workers: { type: "string" },
      seconds: { type: "string" },
      engines: { type: "string" },
      "state-base": { type: "string" },
      shards: { type: "string" },
      ledger: { type: "boolean" },
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const count = (flag: string, raw: string | undefined, fallback: number) => {
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(value) || value <= 0 || value > 10_000) {
      throw new Error(`--${flag} must be a positive integer, got "${raw}"`);
    }
    return value;
  };
  return {
    workers: count("workers", values.workers, 24),
    seconds: count("seconds", values.seconds, 8),
    engines: count("engines", values.engines, 2),
    stateBase: values["state-base"] ?? tmpdir(),
    shards: values.shards === undefined ? undefined : shardsOption(values.shards),
    ledger: values.ledger ?? false,
  };
}

function shardsOption(raw: string): number {
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 2 || value > 64) throw new Error(`--shards must be an integer from 2 to 64, got "${raw}"`);
  return value;
}

interface CallResult {
  ms: number;
  status: number;
  programId: string | undefined;
  /** x-agentix-io-counts: "objects=2;rounds=1;d1=0". */
  io: string | null;
}

async function chatCall(stack: LocalStack, programId?: string): Promise<CallResult> {
  const started = performance.now();
  try {
    const res = await fetch(`${stack.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${stack.devKey}`,
        "content-type": "application/json",
        ...(programId ? { [Header.program]: programId } : {}),
      },
      body: JSON.stringify({ model: stack.model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
    });
    await res.arrayBuffer();
    return {
      ms: performance.now() - started,
      status: res.status,
      programId: res.headers.get(Header.program) ?? undefined,
      io: res.headers.get(Header.ioCounts),
    };
  } catch {
    return { ms: performance.now() - started, status: 0, programId: undefined, io: null };
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;

interface PhaseResult {
  callsPerSecond: number;
  p50: number;
  p99: number;
  failed: string;
  /** Per answered call, until it was forwarded. */
  objectCalls: number;
  objectRounds: number;
  d1OnPath: number;
  /** Every D1 query of the isolate in the phase (and its ledger's tail), per answered call. */
  d1Total: number;
}

const mean = (values: number[]) => (values.length === 0 ? Number.NaN : values.reduce((a, b) => a + b, 0) / values.length);

function parseIo(header: string | null): { objects: number; rounds: number; d1: number } | undefined {
  const match = header === null ? null : /^objects=(\d+);rounds=(\d+);d1=(\d+)$/.exec(header);
  return match ? { objects: Number(match[1]), rounds: Number(match[2]), d1: Number(match[3]) } : undefined;
}

/** The isolate's D1 queries, and its programs' hand-offs to their ledgers (one DO request each, after the response). */
async function isolateD1Totals(stack: LocalStack): Promise<{ worker: number; objects: number; ledger: number; handOffs: number }> {
  const res = await fetch(`${stack.edgeUrl}/debug/io-totals`);
  if (!res.ok) throw new Error(`/debug/io-totals answered ${res.status}`);
  return (await res.json()) as { worker: number; objects: number; ledger: number; handOffs: number };
}

async function isolateD1(stack: LocalStack): Promise<number> {
  const totals = await isolateD1Totals(stack);
  return totals.worker + totals.objects;
}

/** What one run of a phase saw: its answered calls' latencies and I/O counts. */
interface PhaseRun {
  latencies: number[];
  ios: { objects: number; rounds: number; d1: number }[];
  failures: Map<number, number>;
  wallSeconds: number;
}

/** Clients calling back to back for `seconds`; client i uses programs[i] (undefined: a new program per call). */
async function runOnce(stack: LocalStack, programs: (string | undefined)[], seconds: number): Promise<PhaseRun> {
  const run: PhaseRun = { latencies: [], ios: [], failures: new Map(), wallSeconds: 0 };
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    programs.map(async (programId) => {
      while (performance.now() < deadline) {
        const result = await chatCall(stack, programId);
        if (result.status === 200) {
          run.latencies.push(result.ms);
          const io = parseIo(result.io);
          if (io) run.ios.push(io);
        } else run.failures.set(result.status, (run.failures.get(result.status) ?? 0) + 1);
      }
    }),
  );
  run.wallSeconds = (performance.now() - started) / 1000;
  return run;
}

function summarise(runs: PhaseRun[], d1Queries: number): PhaseResult {
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const ios = runs.flatMap((r) => r.ios);
  const failures = new Map<number, number>();
  for (const run of runs) for (const [status, n] of run.failures) failures.set(status, (failures.get(status) ?? 0) + n);
  return {
    callsPerSecond: latencies.length / runs.reduce((sum, r) => sum + r.wallSeconds, 0),
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    failed: [...failures].map(([status, n]) => `${n}×${status === 0 ? "unreachable" : status}`).join(" ") || "none",
    objectCalls: mean(ios.map((io) => io.objects)),
    objectRounds: mean(ios.map((io) => io.rounds)),
    d1OnPath: mean(ios.map((io) => io.d1)),
    d1Total: d1Queries / Math.max(1, latencies.length),
  };
}

const PHASES = ["new-program", "existing-program", "new, no inference"] as const;
type PhaseName = (typeof PHASES)[number];

/** The edge's vars for each side of the comparison (both count their I/O). */
const MODES = {
  baseline: { COUNT_IO: "1", EDGE_BASELINE_HOT_PATH: "1", LEDGER_FLUSH_MS: "0" },
  "hot path": { COUNT_IO: "1" },
} as const;
/** --ledger: both on the hot path, LEDGER_FLUSH_MS 5 s; only where usage rows wait differs. */
const LEDGER_MODES = {
  "per program": { COUNT_IO: "1", EDGE_BASELINE_PROGRAM_LEDGER: "1" },
  "per tenant": { COUNT_IO: "1" },
} as const;
type ModeName = keyof typeof MODES;
type LedgerModeName = keyof typeof LEDGER_MODES;
const MODE_NAMES = Object.keys(MODES) as ModeName[];
/**
 * Each phase runs A B B A (baseline, hot path, hot path, baseline), so a change in the
 * machine's load during the phase weighs on both sides alike (it is shared with others).
 */
const ORDER: readonly ModeName[] = ["baseline", "hot path", "hot path", "baseline"];
/**
 * After a phase, its last usage rows may still be on their way to D1: LEDGER_FLUSH_MS
 * (default 5 s) after their settle, plus the alarm's and the hand-off's slack (usage/freshness.ts).
 */
const LEDGER_TAIL_MS = 7_500;

/** One side: its stack (started idle next to the other), and its clients' programs. */
interface Side {
  stack: LocalStack;
  stateDir: string;
  programs: string[];
  unloaded: { newProgram: string; existingProgram: string };
}

async function adminPatch(stack: LocalStack, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${stack.edgeUrl}${path}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`PATCH ${path} answered ${res.status}: ${await res.text()}`);
}

async function startSide(options: Options, mode: ModeName | LedgerModeName): Promise<Side> {
  const stateDir = await mkdtemp(path.join(options.stateBase, "agentix-edge-load-"));
  const stack = await startLocalStack({
    root: path.resolve(import.meta.dirname, "../../.."),
    stateDir,
    edgePort: await freePort(),
    poolPort: 0,
    // One pool: the bench measures the edge in front of it.
    pools: 1,
    engines: options.engines,
    timeScale: Number.POSITIVE_INFINITY,
    // The pool must not hold calls back: only the edge's overhead should show.
    engineMaxInFlight: options.workers,
    edgeVars: mode in MODES ? MODES[mode as ModeName] : LEDGER_MODES[mode as LedgerModeName],
  });
  await adminPatch(stack, `/admin/tenants/${stack.tenantId}/overrides`, {
    rpm: 1_000_000,
    tpm: 1_000_000_000,
    max_concurrent: 10_000,
    max_active_programs: 10_000_000,
  });
  for (let i = 0; i < 10; i++) await chatCall(stack); // warm-up
  const programs: string[] = [];
  for (let i = 0; i < options.workers; i++) {
    const first = await chatCall(stack);
    if (!first.programId) throw new Error(`starting a program answered ${first.status}`);
    programs.push(first.programId);
  }
  return { stack, stateDir, programs, unloaded: { newProgram: "", existingProgram: "" } };
}

async function unloadedP50(stack: LocalStack, programId?: string): Promise<string> {
  const latencies: number[] = [];
  for (let i = 0; i < 20; i++) latencies.push((await chatCall(stack, programId)).ms);
  return percentile(latencies.sort((a, b) => a - b), 0.5).toFixed(1);
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "-");

async function main(options: Options): Promise<void> {
  const sides = new Map<ModeName, Side>();
  try {
    for (const mode of MODE_NAMES) sides.set(mode, await startSide(options, mode));
    const side = (mode: ModeName): Side => {
      const found = sides.get(mode);
      if (!found) throw new Error(`no ${mode} stack`);
      return found;
    };
    for (const mode of MODE_NAMES) {
      const s = side(mode);
      s.unloaded = { newProgram: await unloadedP50(s.stack), existingProgram: await unloadedP50(s.stack, s.programs[0]) };
    }
    const results = new Map<PhaseName, Map<ModeName, PhaseResult>>();
    for (const phase of PHASES) {
      if (phase === "new, no inference") {
        for (const mode of MODE_NAMES) await adminPatch(side(mode).stack, `/admin/tenants/${side(mode).stack.tenantId}`, { program_inference: false });
      }
      const d1Before = new Map<ModeName, number>();
      for (const mode of MODE_NAMES) d1Before.set(mode, await isolateD1(side(mode).stack));
      const runs = new Map<ModeName, PhaseRun[]>(MODE_NAMES.map((mode) => [mode, []]));
      for (const mode of ORDER) {
        const s = side(mode);
        const programs = phase === "existing-program" ? s.programs : s.programs.map(() => undefined);
        runs.get(mode)?.push(await runOnce(s.stack, programs, options.seconds / 2));
      }
      // The phase's usage rows reach D1 within the ledger's delay: wait for them before reading the totals.
      await new Promise((resolve) => setTimeout(resolve, LEDGER_TAIL_MS));
      const byMode = new Map<ModeName, PhaseResult>();
      for (const mode of MODE_NAMES) {
        const d1 = (await isolateD1(side(mode).stack)) - (d1Before.get(mode) ?? 0);
        byMode.set(mode, summarise(runs.get(mode) ?? [], d1));
      }
      results.set(phase, byMode);
    }

    console.log(
      `${options.workers} clients, ${options.seconds} s per phase and side (two halves, A B B A), engines take no model time; ` +
        "per call: DO calls / sequential DO rounds / D1 queries before the pool, and all D1 queries per call (ledger included)",
    );
    for (const mode of MODE_NAMES) {
      const { unloaded } = side(mode);
      console.log(`unloaded p50 (${mode}): new-program ${unloaded.newProgram} ms, existing-program ${unloaded.existingProgram} ms`);
    }
    console.log(
      [
        "phase".padEnd(17),
        "mode".padEnd(9),
        "calls/s".padStart(8),
        "p50 ms".padStart(7),
        "p99 ms".padStart(7),
        "DO calls".padStart(9),
        "DO rounds".padStart(10),
        "D1 on path".padStart(11),
        "D1 total".padStart(9),
        "  failures",
      ].join(" "),
    );
    for (const [phase, byMode] of results) {
      for (const [mode, r] of byMode) {
        console.log(
          [
            phase.padEnd(17),
            mode.padEnd(9),
            fixed(r.callsPerSecond, 1).padStart(8),
            fixed(r.p50, 0).padStart(7),
            fixed(r.p99, 0).padStart(7),
            fixed(r.objectCalls, 2).padStart(9),
            fixed(r.objectRounds, 2).padStart(10),
            fixed(r.d1OnPath, 2).padStart(11),
            fixed(r.d1Total, 2).padStart(9),
            `  ${r.failed}`,
          ].join(" "),
        );
      }
    }
  } finally {
    for (const { stack, stateDir } of sides.values()) {
      await stack.stop();
      await rm(stateDir, { recursive: true, force: true });
    }
  }
}

/**
 * One tenant, one hot-path stack: its limiter as one object, then as `shards` objects
 * (limiter/shards.ts), switched by the admin API between runs, A B B A. Locally every
 * object runs in the one workerd process on the machine's shared cores, so this shows what
 * sharding costs a call (its walk, budget grants) and that nothing is refused, not the
 * parallelism N objects on N machines give in production.
 */
async function compareShards(options: Options, shards: number): Promise<void> {
  const side = await startSide(options, "hot path");
  try {
    const overrides = `/admin/tenants/${side.stack.tenantId}/overrides`;
    const order = [1, shards, shards, 1];
    const runs = new Map<number, PhaseRun[]>([
      [1, []],
      [shards, []],
    ]);
    for (const count of order) {
      await adminPatch(side.stack, overrides, { limiter_shards: count });
      for (const programId of side.programs.slice(0, 4)) await chatCall(side.stack, programId); // warm the shards
      runs.get(count)?.push(await runOnce(side.stack, side.programs, options.seconds / 2));
    }
    console.log(
      `${options.workers} clients on one tenant's existing programs, ${options.seconds} s per side (two halves, A B B A), ` +
        "engines take no model time; one workerd process runs every object on this machine's shared cores",
    );
    console.log(["limiter shards".padEnd(15), "calls/s".padStart(8), "p50 ms".padStart(7), "p99 ms".padStart(7), "DO calls".padStart(9), "DO rounds".padStart(10), "  failures"].join(" "));
    for (const [count, sideRuns] of runs) {
      const r = summarise(sideRuns, 0);
      console.log(
        [
          String(count).padEnd(15),
          fixed(r.callsPerSecond, 1).padStart(8),
          fixed(r.p50, 0).padStart(7),
          fixed(r.p99, 0).padStart(7),
          fixed(r.objectCalls, 2).padStart(9),
          fixed(r.objectRounds, 2).padStart(10),
          `  ${r.failed}`,
        ].join(" "),
      );
    }
  } finally {
    await side.stack.stop();
    await rm(side.stateDir, { recursive: true, force: true });
  }
}

/**
 * Where usage rows wait, counted: two hot-path stacks side by side, one whose programs
 * each batch their own rows to D1 (the path before the tenant ledger), one whose programs
 * hand them to their tenant's UsageLedger; new-program and existing-program phases, A B B A.
 * D1 queries are every query of the isolate in the phase (objects' batches included), read
 * after the phase's last batches were due, per answered call.
 */
async function compareLedgers(options: Options): Promise<void> {
  const names = Object.keys(LEDGER_MODES) as LedgerModeName[];
  const sides = new Map<LedgerModeName, Side>();
  try {
    for (const mode of names) sides.set(mode, await startSide(options, mode));
    const side = (mode: LedgerModeName): Side => {
      const found = sides.get(mode);
      if (!found) throw new Error(`no ${mode} stack`);
      return found;
    };
    // The set-up's calls (warm-up, the clients' programs) reach D1 before the first phase is counted.
    await new Promise((resolve) => setTimeout(resolve, LEDGER_TAIL_MS));
    const order: LedgerModeName[] = [names[0]!, names[1]!, names[1]!, names[0]!];
    const results: { phase: string; mode: LedgerModeName; result: PhaseResult; ledgerPerCall: number; handOffsPerCall: number }[] = [];
    for (const phase of ["new-program", "existing-program"] as const) {
      const d1Before = new Map<LedgerModeName, { all: number; ledger: number; handOffs: number }>();
      for (const mode of names) {
        const totals = await isolateD1Totals(side(mode).stack);
        d1Before.set(mode, { all: totals.worker + totals.objects, ledger: totals.ledger, handOffs: totals.handOffs });
      }
      const runs = new Map<LedgerModeName, PhaseRun[]>(names.map((mode) => [mode, []]));
      for (const mode of order) {
        const s = side(mode);
        const programs = phase === "existing-program" ? s.programs : s.programs.map(() => undefined);
        runs.get(mode)?.push(await runOnce(s.stack, programs, options.seconds / 2));
      }
      await new Promise((resolve) => setTimeout(resolve, LEDGER_TAIL_MS));
      for (const mode of names) {
        const totals = await isolateD1Totals(side(mode).stack);
        const before = d1Before.get(mode) ?? { all: 0, ledger: 0, handOffs: 0 };
        const result = summarise(runs.get(mode) ?? [], totals.worker + totals.objects - before.all);
        const answered = Math.max(1, runs.get(mode)?.reduce((sum, run) => sum + run.latencies.length, 0) ?? 0);
        const ledgerPerCall = (totals.ledger - before.ledger) / answered;
        results.push({ phase, mode, result, ledgerPerCall, handOffsPerCall: (totals.handOffs - before.handOffs) / answered });
      }
    }
    console.log(
      `${options.workers} clients, ${options.seconds} s per phase and side (two halves, A B B A), engines take no model time, ` +
        "LEDGER_FLUSH_MS 5000; per call: DO calls and sequential DO rounds and D1 queries before the pool, programs' hand-offs to the ledger (a DO call each, after the response), the ledger's D1 writes (usage and program rows), " +
        "and all D1 queries (background reads of the pool directory, key use and the like included: they come with time, not calls)",
    );
    console.log(
      ["phase".padEnd(17), "usage rows".padEnd(12), "calls/s".padStart(8), "p50 ms".padStart(7), "p99 ms".padStart(7), "DO calls".padStart(9), "DO rounds".padStart(10), "hand-offs".padStart(10), "D1 on path".padStart(11), "ledger D1".padStart(10), "all D1".padStart(7), "  failures"].join(" "),
    );
    for (const { phase, mode, result: r, ledgerPerCall, handOffsPerCall } of results) {
      console.log(
        [
          phase.padEnd(17),
          mode.padEnd(12),
          fixed(r.callsPerSecond, 1).padStart(8),
          fixed(r.p50, 0).padStart(7),
          fixed(r.p99, 0).padStart(7),
          fixed(r.objectCalls, 2).padStart(9),
          fixed(r.objectRounds, 2).padStart(10),
          fixed(handOffsPerCall, 3).padStart(10),
          fixed(r.d1OnPath, 2).padStart(11),
          fixed(ledgerPerCall, 3).padStart(10),
          fixed(r.d1Total, 3).padStart(7),
          `  ${r.failed}`,
        ].join(" "),
      );
    }
  } finally {
    for (const { stack, stateDir } of sides.values()) {
      await stack.stop();
      await rm(stateDir, { recursive: true, force: true });
    }
  }
}

const options = parseOptions(process.argv.slice(2));
(options.shards !== undefined ? compareShards(options, options.shards) : options.ledger ? compareLedgers(options) : main(options)).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
