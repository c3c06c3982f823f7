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
 */

const USAGE = `edge-load [options]   calls/s and latency of the edge under wrangler dev

  --workers N      concurrent clients (default 24)
  --seconds S      seconds per phase (default 8)
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
    seconds: count("seconds", values.seconds, 8),
    engines: count("engines", values.engines, 2),
    stateBase: values["state-base"] ?? tmpdir(),
  };
}

interface CallResult {
  ms: number;
  status: number;
  programId: string | undefined;
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
    return { ms: performance.now() - started, status: res.status, programId: res.headers.get(Header.program) ?? undefined };
  } catch {
    return { ms: performance.now() - started, status: 0, programId: undefined };
  }
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;

/** Clients calling back to back for `seconds`; client i uses programs[i] (undefined: a new program per call). */
async function runPhase(
  stack: LocalStack,
  name: string,
  programs: (string | undefined)[],
  seconds: number,
): Promise<string> {
  const latencies: number[] = [];
  const failures = new Map<number, number>();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  await Promise.all(
    programs.map(async (programId) => {
      while (performance.now() < deadline) {
        const result = await chatCall(stack, programId);
        if (result.status === 200) latencies.push(result.ms);
        else failures.set(result.status, (failures.get(result.status) ?? 0) + 1);
      }
    }),
  );
  const wallSeconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const failed = [...failures].map(([status, n]) => `${n}×${status === 0 ? "unreachable" : status}`).join(" ") || "none";
  const callsPerSecond = (latencies.length / wallSeconds).toFixed(1);
  const [p50, p99] = [0.5, 0.99].map((p) => percentile(latencies, p).toFixed(0));
  return `${name.padEnd(17)} ${callsPerSecond.padStart(7)} ${p50?.padStart(8)} ${p99?.padStart(8)}  ${failed}`;
}

async function main(options: Options): Promise<void> {
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
    console.log(`unloaded p50: new-program ${await unloaded()} ms, existing-program ${await unloaded(programs[0])} ms`);
    console.log(`${options.workers} clients, ${options.seconds} s per phase`);
    console.log(`${"phase".padEnd(17)} ${"calls/s".padStart(7)} ${"p50 ms".padStart(8)} ${"p99 ms".padStart(8)}  failures`);
    console.log(await runPhase(stack, "new-program", programs.map(() => undefined), options.seconds));
    console.log(await runPhase(stack, "existing-program", programs, options.seconds));
    const off = await fetch(`${stack.edgeUrl}/admin/tenants/${stack.tenantId}`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
      body: JSON.stringify({ program_inference: false }),
    });
    if (!off.ok) throw new Error(`turning program inference off answered ${off.status}: ${await off.text()}`);
    console.log(await runPhase(stack, "new, no inference", programs.map(() => undefined), options.seconds));
    console.log(`unloaded p50 with inference off: new-program ${await unloaded()} ms`);
  } finally {
    await stack.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
}

main(parseOptions(process.argv.slice(2))).then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  },
);
