import { constants, rmSync } from "node:fs";
import { access, mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import { type BenchMachine, benchMachine, loadAverageNow } from "./bench-machine.js";
import path from "node:path";
import { randomToken } from "../../protocol/ids.js";
import { waitForEngineIdle } from "./proxy-engine-metrics.js";
import { type LoadFigures, runLoad } from "./proxy-load.js";
import { processCpuMs } from "./relay-cpu.js";
import { type GcTotals, gcTotalsBetween } from "./gc-meter.js";
import type { ProxyBenchOptions, ProxyMode, ProxyTargetName } from "./proxy-options.js";
import { type CpuPlan, underPlacement } from "./placement.js";
import { startPortkeyGateway } from "./proxy-portkey.js";
import { type ProbeOutcome, probeTarget, referenceCompletion } from "./proxy-probe.js";
import { freePort } from "../free-port.js";
import { startEdgeStackProcess, startEngineProcess, startNodeProxyProcess, startPoolProcess } from "./proxy-server-process.js";
import type { EdgeStackReady } from "./proxy-server-spec.js";
import { type BenchTarget, edgeTarget, engineTarget, nodeProxyTarget, poolTarget, portkeyTarget } from "./proxy-targets.js";
import { type ChatWorkload, chatRequestBody, completionVerifier } from "./proxy-workload.js";

/*
 * The benchmark's machinery: start the targets (each server in its own process),
 * probe each once, warm each up (JIT, connections: a cold process is slower, and a
 * short run would measure that), then measure in rounds: every round runs every
 * mode, level and target, targets in forward order in even rounds and reversed in
 * odd ones (A B C, C B A, …), so slow drift of a shared machine hits them alike; the
 * report takes the median over rounds.
 * Everything started is stopped in `finally`, whatever happened.
 */

export interface TargetRun {
  target: ProxyTargetName;
  mode: ProxyMode;
  phase: "warmup" | "measure";
  /** 0-based measured round (warm-ups: 0). */
  round: number;
  figures: LoadFigures;
  /** Requests that could not be prepared (pool signatures ran out): errors. */
  shortfall: number;
  /** CPU ms the target's process (BenchTarget.cpuPid) used during the run; absent when not read. */
  cpuMs?: number;
  /** The GC pauses of that process during the run (gc-meter.ts); absent when not read. */
  gc?: GcTotals;
}

export interface ProxyBenchReport {
  startedAt: string;
  finishedAt: string;
  machine: BenchMachine;
  options: Omit<ProxyBenchOptions, "output">;
  /** The CPUs the load generator (bench), the engine and the proxies were pinned to; empty under the free placement. */
  cpus: CpuPlan;
  model: string;
  /** Where the edge stack kept its local D1 / Durable Objects (when it ran). */
  edgeStateBase: string | null;
  targets: { name: ProxyTargetName; label: string; description: string }[];
  probes: ProbeOutcome[];
  runs: TargetRun[];
}

export interface MeasureHooks {
  /** Progress lines (the CLI prints them on stderr). */
  log?: (line: string) => void;
  signal?: AbortSignal;
}

/** Root of the project (wrangler.toml), for the edge stack. */
export const projectRoot = path.resolve(import.meta.dirname, "../../..");

/** Longest wait for a target's leftover calls to drain after a run. */
const DRAIN_TIMEOUT_MS = 20_000;

/** Used for presigning when no figure exists yet for a run's target and mode. */
const FALLBACK_EXPECTED_RPS = 5_000;

const ADMIN_OVERRIDES = {
  rpm: 10_000_000,
  tpm: 1_000_000_000_000,
  max_concurrent: 1_000_000,
  max_active_programs: 1_000_000_000,
  monthly_token_budget: 1_000_000_000_000_000,
  // The workload sends ignore_eos, an engine extension the edge forwards only when allowed.
  allowed_extensions: ["ignore_eos"],
};

const RAM_DISK = "/dev/shm";

/**
 * Where the throwaway edge stack keeps its local D1 and Durable Objects: tmpfs when
 * there is one. On disk, wrangler dev's local storage waits for fsync on every write,
 * which made the edge 2–4× slower here; production storage is neither, so a RAM
 * disk keeps a dev-machine artifact out of the edge's figures.
 */
async function edgeStateBase(): Promise<string> {
  try {
    await access(RAM_DISK, constants.W_OK);
    return RAM_DISK;
  } catch {
    return os.tmpdir();
  }
}

/** The dev tenant's plan (free: 60 rpm) would throttle a benchmark; lift its limits for this throwaway stack. */
async function liftEdgeLimits(stack: EdgeStackReady, log: (line: string) => void): Promise<void> {
  const res = await fetch(`${stack.edgeUrl}/admin/tenants/${stack.tenantId}/overrides`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify(ADMIN_OVERRIDES),
  });
  const text = await res.text();
  if (!res.ok) log(`warning: could not lift the dev tenant's limits (${res.status} ${text.slice(0, 200)}); 429s would fail the run`);
}

export function measureProxyOverhead(options: ProxyBenchOptions, hooks: MeasureHooks = {}): Promise<ProxyBenchReport> {
  return underPlacement(options.placement, (cpus) => measurePlaced(options, hooks, cpus));
}

async function measurePlaced(options: ProxyBenchOptions, hooks: MeasureHooks, cpus: CpuPlan): Promise<ProxyBenchReport> {
  const log = hooks.log ?? (() => {});
  const signal = hooks.signal;
  const startedAt = new Date();
  const startLoad = loadAverageNow();
  const stops: { name: string; stop: () => Promise<void> }[] = [];
  const probes: ProbeOutcome[] = [];
  const runs: TargetRun[] = [];
  const targets: BenchTarget[] = [];
  const want = (name: ProxyTargetName) => options.targets.includes(name);
  let edgeStateDirBase: string | null = null;

  try {
    log("starting the simulated engine (zero model time)");
    const engine = await startEngineProcess({ role: "engine" }, { signal, cpus: cpus.engine });
    stops.push({ name: "engine", stop: engine.stop });
    if (want("engine")) targets.push({ ...engineTarget(engine.ready), cpuPid: engine.pid, gcTotals: engine.gcTotals });

    if (want("node-proxy")) {
      const proxy = await startNodeProxyProcess({ role: "node-proxy", engineUrl: engine.ready.url }, { signal, cpus: cpus.proxy });
      stops.push({ name: "node proxy", stop: proxy.stop });
      targets.push({ ...nodeProxyTarget(proxy.ready, engine.ready.url), cpuPid: proxy.pid, gcTotals: proxy.gcTotals });
      log(`minimal node proxy: ${proxy.ready.url}`);
    }

    const startPoolTarget = async (name: "pool" | "pool-baseline", sourceTree: string | undefined) => {
      const signingKey = { id: "bench-1", secret: randomToken(48) };
      const pool = await startPoolProcess(
        {
          role: "pool",
          engineUrl: engine.ready.url,
          signingKey,
          engineInFlight: options.engineInFlight,
          // Presigned calls are used up to a run's length after signing.
          timestampWindowMs: 30_000 + Math.ceil(options.durationSeconds * 2_000),
          replayCapacity: 2_000_000,
        },
        { signal, cpuProfileDir: name === "pool" ? options.cpuProfileDir : undefined, sourceTree, cpus: cpus.proxy },
      );
      stops.push({ name, stop: pool.stop });
      targets.push({ ...poolTarget(pool.ready, engine.ready.url, signingKey, name), cpuPid: pool.pid, gcTotals: pool.gcTotals });
      log(`${name === "pool" ? "pool core" : "baseline pool core"}${sourceTree === undefined ? "" : ` (${sourceTree})`}: ${pool.ready.url}`);
    };
    if (want("pool") && options.baselinePoolTree !== undefined) await startPoolTarget("pool-baseline", options.baselinePoolTree);
    if (want("pool")) await startPoolTarget("pool", options.poolTree);

    if (want("portkey")) {
      const gateway = await startPortkeyGateway({ signal, cpus: cpus.proxy });
      stops.push({ name: "portkey", stop: gateway.stop });
      targets.push({ ...portkeyTarget(gateway, engine.ready.url), cpuPid: gateway.pid });
      log(`Portkey gateway: ${gateway.url}`);
    }

    if (want("edge")) {
      log("starting the local stack (engine + pool + wrangler dev); takes ~15 s");
      edgeStateDirBase = await edgeStateBase();
      const stateDir = await mkdtemp(path.join(edgeStateDirBase, "agentix-bench-proxy-"));
      // Also on a forced exit (second Ctrl-C), which skips the `finally` below.
      const removeStateOnExit = () => rmSync(stateDir, { recursive: true, force: true });
      process.on("exit", removeStateOnExit);
      stops.push({
        name: "edge state",
        stop: async () => {
          process.off("exit", removeStateOnExit);
          await rm(stateDir, { recursive: true, force: true });
        },
      });
      const stack = await startEdgeStackProcess(
        { role: "edge-stack", root: projectRoot, stateDir, edgePort: await freePort(), engineInFlight: options.engineInFlight },
        { signal, cpus: cpus.proxy },
      );
      stops.push({ name: "edge stack", stop: stack.stop });
      await liftEdgeLimits(stack.ready, log);
      targets.push(edgeTarget(stack.ready));
      log(`edge: ${stack.ready.edgeUrl}`);
    }

    for (const mode of options.modes) {
      const workload: ChatWorkload = { model: engine.ready.model, mode, maxTokens: options.maxTokens };
      const reference = await referenceCompletion(engine.ready.url, workload);
      for (const target of targets) probes.push(await probeTarget(target, workload, reference));
    }
    log(`probes passed: every target returned the engine's own completion (${probes.length} checks)`);

    /**
     * An upper estimate of a run's rate, for presigning: the larger of 3× the best this
     * target did so far in this mode and the bare engine's best in this mode (a proxy in
     * front of it cannot be much faster). Not its own figure alone: a warm-up taken while
     * the shared machine was busy once left a later, quieter run short of signatures.
     */
    const expectedRpsOf = (target: ProxyTargetName, mode: ProxyMode): number => {
      const bestOf = (name: ProxyTargetName) =>
        Math.max(0, ...runs.filter((r) => r.target === name && r.mode === mode).map((r) => r.figures.requestsPerSecond));
      const estimate = Math.max(3 * bestOf(target), 1.5 * bestOf("engine"));
      return estimate > 0 ? Math.max(estimate, 10) : FALLBACK_EXPECTED_RPS;
    };

    const run = async (target: BenchTarget, workload: ChatWorkload, connections: number, phase: TargetRun["phase"], round: number) => {
      signal?.throwIfAborted();
      const durationSeconds = phase === "warmup" ? options.warmupSeconds : options.durationSeconds;
      const body = chatRequestBody(workload);
      const expectedRps = expectedRpsOf(target.name, workload.mode);
      const prepared = await target.prepareRun({ body, connections, durationSeconds, expectedRps });
      // CPU per call is the figure least moved by a loaded machine: it counts work, not waiting.
      const cpuOf = () => (target.cpuPid === undefined ? undefined : processCpuMs(target.cpuPid));
      const gcBefore = await target.gcTotals?.();
      const cpuBefore = cpuOf();
      const figures = await runLoad(
        { url: target.url, headers: target.headers, body, session: prepared.session, verifyBody: completionVerifier(workload) },
        { connections, durationSeconds, signal },
      );
      const cpuAfter = cpuOf();
      const gcAfter = await target.gcTotals?.();
      const cpuMs = cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore;
      const gc = gcBefore === undefined || gcAfter === undefined ? undefined : gcTotalsBetween(gcBefore, gcAfter);
      runs.push({
        target: target.name,
        mode: workload.mode,
        phase,
        round,
        figures,
        shortfall: prepared.shortfall(),
        ...(cpuMs === undefined ? {} : { cpuMs }),
        ...(gc === undefined ? {} : { gc }),
      });
      // Calls cut off at the end of the run may still be working their way through the proxy.
      if (!(await waitForEngineIdle(target.engineUrl, DRAIN_TIMEOUT_MS, signal))) {
        log(`warning: ${target.label}'s engine was still busy ${DRAIN_TIMEOUT_MS / 1000} s after the run; the next run may be disturbed`);
      }
      const bad = figures.non2xx + figures.errors + figures.mismatches + prepared.shortfall();
      log(
        `${workload.mode.padEnd(13)} ${target.label.padEnd(14)} ${phase === "warmup" ? "warm-up" : `r${round + 1} c=${connections}`.padEnd(9)} ` +
          `${figures.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${figures.latencyMs.p50.toFixed(2)} ms  p99 ${figures.latencyMs.p99.toFixed(2)} ms` +
          (bad > 0 ? `  FAILURES ${bad} (status ${JSON.stringify(figures.statusCodes)})` : ""),
      );
    };

    const highest = options.connections[options.connections.length - 1] ?? options.moderateConnections;
    const workloadOf = (mode: ProxyMode): ChatWorkload => ({ model: engine.ready.model, mode, maxTokens: options.maxTokens });
    // At the highest level, so every connection the proxies keep to the engine is open before measuring.
    if (options.warmupSeconds > 0) {
      for (const mode of options.modes) {
        for (const target of targets) await run(target, workloadOf(mode), highest, "warmup", 0);
      }
    }
    for (let round = 0; round < options.rounds; round++) {
      const order = round % 2 === 0 ? targets : [...targets].reverse();
      for (const mode of options.modes) {
        for (const connections of options.connections) {
          for (const target of order) await run(target, workloadOf(mode), connections, "measure", round);
        }
      }
    }

    const { output: _output, ...recorded } = options;
    return {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: benchMachine(startLoad),
      options: recorded,
      cpus,
      model: engine.ready.model,
      edgeStateBase: edgeStateDirBase,
      targets: targets.map(({ name, label, description }) => ({ name, label, description })),
      probes,
      runs,
    };
  } finally {
    for (const { name, stop } of stops.reverse()) {
      try {
        await stop();
      } catch (error) {
        log(`warning: stopping ${name} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  }
}
