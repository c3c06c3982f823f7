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
 * Each phase runs twice, in one sitting: on the baseline (the call path before issue 14:
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
  --seconds S      seconds per phase (default 6)
  --engines N      simulated engines (default 2)
  --state-base DIR where the throwaway state directory goes (default the OS temp dir)`;

interface Options {
  workers: number;
  seconds: number;
  engines: number;
  stateBase: string;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      workers: { type: "string" },
      seconds: { type: "string" },
      engines: { type: "string" },
      "state-base": { type: "string" },
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
    seconds: count("seconds", values.seconds, 6),
    engines: count("engines", values.engines, 2),
    stateBase: values["state-base"] ?? tmpdir(),
  };
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

async function isolateD1(stack: LocalStack): Promise<number> {
  const res = await fetch(`${stack.edgeUrl}/debug/io-totals`);
  if (!res.ok) throw new Error(`/debug/io-totals answered ${res.status}`);
  const totals = (await res.json()) as { worker: number; objects: number };
  return totals.worker + totals.objects;
}

/** Clients calling back to back for `seconds`; client i uses programs[i] (undefined: a new program per call). */
async function runPhase(stack: LocalStack, programs: (string | undefined)[], seconds: number, ledgerTailMs: number): Promise<PhaseResult> {
  const latencies: number[] = [];
  const ios: { objects: number; rounds: number; d1: number }[] = [];
  const failures = new Map<number, number>();
  const d1Before = await isolateD1(stack);
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    programs.map(async (programId) => {
      while (performance.now() < deadline) {
        const result = await chatCall(stack, programId);
        if (result.status === 200) {
          latencies.push(result.ms);
          const io = parseIo(result.io);
          if (io) ios.push(io);
        } else failures.set(result.status, (failures.get(result.status) ?? 0) + 1);
      }
    }),
  );
  const wallSeconds = (performance.now() - started) / 1000;
  // The phase's usage rows reach D1 within the ledger's delay: wait for them before reading the total.
  await new Promise((resolve) => setTimeout(resolve, ledgerTailMs));
  const d1After = await isolateD1(stack);
  latencies.sort((a, b) => a - b);
  return {
    callsPerSecond: latencies.length / wallSeconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    failed: [...failures].map(([status, n]) => `${n}×${status === 0 ? "unreachable" : status}`).join(" ") || "none",
    objectCalls: mean(ios.map((io) => io.objects)),
    objectRounds: mean(ios.map((io) => io.rounds)),
    d1OnPath: mean(ios.map((io) => io.d1)),
    d1Total: (d1After - d1Before) / Math.max(1, latencies.length),
  };
}

const PHASES = ["new-program", "existing-program", "new, no inference"] as const;
type PhaseName = (typeof PHASES)[number];

interface ModeResult {
  unloaded: { newProgram: string; existingProgram: string };
  phases: Map<PhaseName, PhaseResult>;
}

/** The edge's vars for each side of the comparison (both count their I/O). */
const MODES = {
  baseline: { COUNT_IO: "1", EDGE_BASELINE_HOT_PATH: "1", LEDGER_FLUSH_MS: "0" },
  "hot path": { COUNT_IO: "1" },
} as const;
type ModeName = keyof typeof MODES;
/** How long after a phase its last usage rows may still be on their way to D1 (LEDGER_FLUSH_MS default 5 s, and slack). */
const LEDGER_TAIL_MS = { baseline: 1_000, "hot path": 6_500 } as const;

async function runMode(options: Options, mode: ModeName): Promise<ModeResult> {
  const stateDir = await mkdtemp(path.join(options.stateBase, "agentix-edge-load-"));
  const stack = await startLocalStack({
    root: path.resolve(import.meta.dirname, "../../.."),
    stateDir,
    edgePort: await freePort(),
    poolPort: await freePort(),
    // One pool: the bench measures the edge in front of it.
    pools: 1,
    engines: options.engines,
    timeScale: Number.POSITIVE_INFINITY,
    // The pool must not hold calls back: only the edge's overhead should show.
    engineMaxInFlight: options.workers,
    edgeVars: MODES[mode],
  });
  try {
    const lifted = await fetch(`${stack.edgeUrl}/admin/tenants/${stack.tenantId}/overrides`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ rpm: 1_000_000, tpm: 1_000_000_000, max_concurrent: 10_000, max_active_programs: 10_000_000 }),
    });
    if (!lifted.ok) throw new Error(`lifting the dev tenant's limits answered ${lifted.status}: ${await lifted.text()}`);

    const unloaded = async (programId?: string) => {
      const latencies: number[] = [];
      for (let i = 0; i < 20; i++) latencies.push((await chatCall(stack, programId)).ms);
      return percentile(latencies.sort((a, b) => a - b), 0.5).toFixed(1);
    };
    for (let i = 0; i < 10; i++) await chatCall(stack); // warm-up
    const programs: string[] = [];
    for (let i = 0; i < options.workers; i++) {
      const first = await chatCall(stack);
      if (!first.programId) throw new Error(`starting a program answered ${first.status}`);
      programs.push(first.programId);
    }
    const result: ModeResult = {
      unloaded: { newProgram: await unloaded(), existingProgram: await unloaded(programs[0]) },
      phases: new Map(),
    };
    const tail = LEDGER_TAIL_MS[mode];
    result.phases.set("new-program", await runPhase(stack, programs.map(() => undefined), options.seconds, tail));
    result.phases.set("existing-program", await runPhase(stack, programs, options.seconds, tail));
    const off = await fetch(`${stack.edgeUrl}/admin/tenants/${stack.tenantId}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ program_inference: false }),
    });
    if (!off.ok) throw new Error(`turning program inference off answered ${off.status}: ${await off.text()}`);
    result.phases.set("new, no inference", await runPhase(stack, programs.map(() => undefined), options.seconds, tail));
    return result;
  } finally {
    await stack.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "-");

async function main(options: Options): Promise<void> {
  const results = new Map<ModeName, ModeResult>();
  // One after the other (never both stacks at once): each gets the machine to itself.
  for (const mode of Object.keys(MODES) as ModeName[]) results.set(mode, await runMode(options, mode));

  console.log(`${options.workers} clients, ${options.seconds} s per phase, engines take no model time; per call: DO calls / sequential DO rounds / D1 queries before the pool, and all D1 queries per call (ledger included)`);
  for (const [mode, result] of results) {
    console.log(`unloaded p50 (${mode}): new-program ${result.unloaded.newProgram} ms, existing-program ${result.unloaded.existingProgram} ms`);
  }
  const header = [
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
  ];
  console.log(header.join(" "));
  for (const phase of PHASES) {
    for (const [mode, result] of results) {
      const r = result.phases.get(phase);
      if (!r) continue;
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
}

main(parseOptions(process.argv.slice(2))).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
