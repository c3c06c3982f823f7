import { type BenchMachine, benchMachine, loadAverageNow } from "./bench-machine.js";
import { randomToken } from "../../protocol/ids.js";
import { chatRequestBody } from "./proxy-workload.js";
import { startPoolProcess, startRelaySourceProcess } from "./proxy-server-process.js";
import { ownCpuMs, processCpuMs, processRunQueueWaitMs } from "./relay-cpu.js";
import { type RelayLevelFigures, runRelayLevel } from "./relay-load.js";
import type { RelayBenchOptions, RelayTargetName } from "./relay-options.js";
import { directTarget, poolCpuKey, poolRelayTarget, type RelayTarget } from "./relay-targets.js";

/*
 * The relay benchmark's machinery: the token source and the pool core each in their
 * own process, one warm-up per target (opens every connection the largest level
 * needs, client → pool → source), then every level with the targets interleaved, in
 * reverse order every other level, so slow drift of the machine, and being run first,
 * hit them alike. Everything started is stopped in
 * `finally`, whatever happened.
 */

export interface RelayRun {
  target: RelayTargetName;
  phase: "warmup" | "measure";
  figures: RelayLevelFigures;
  /** 1-minute load average when the level ended (others' work on the machine). */
  loadAverage: number;
}

export interface RelayBenchReport {
  startedAt: string;
  finishedAt: string;
  machine: BenchMachine;
  options: Omit<RelayBenchOptions, "output">;
  targets: { name: RelayTargetName; label: string; description: string }[];
  runs: RelayRun[];
}

export interface RelayHooks {
  log?: (line: string) => void;
  signal?: AbortSignal;
  /**
   * Replaces a target before it is measured (tests: a wrongly signed pool target, which
   * must come out as failed, not as a figure).
   */
  adjustTarget?: (target: RelayTarget) => RelayTarget;
}

/** KV capacity the pool is told the source has: far above what any level holds, so admission never holds a stream back. */
const UNBOUNDED_KV_TOKENS = 1_000_000_000;

/** Tokens per warm-up stream: enough to open and reuse every connection, short enough to take a moment. */
const WARMUP_TOKENS = 2;

/**
 * The warm-up opens its connections 2 ms apart: 2,000 connects within one interval
 * overflow the pool's accept queue (Node's default listen backlog, 511), and a
 * connection left that long unaccepted was reset (ECONNRESET in a run at load 11).
 */
const WARMUP_CONNECT_SPACING_MS = 2;

export async function measureRelayThroughput(options: RelayBenchOptions, hooks: RelayHooks = {}): Promise<RelayBenchReport> {
  const log = hooks.log ?? (() => {});
  const { signal } = hooks;
  const startedAt = new Date();
  const startLoad = loadAverageNow();
  const stops: { name: string; stop: () => Promise<void> }[] = [];
  const targets: RelayTarget[] = [];
  const runs: RelayRun[] = [];
  const largest = Math.max(...options.levels);

  try {
    const source = await startRelaySourceProcess({ role: "relay-source", intervalMs: options.intervalMs }, { signal });
    stops.push({ name: "token source", stop: source.stop });
    log(`token source: ${source.ready.url} (one token every ${options.intervalMs} ms per stream)`);
    const cpu: Record<string, () => number | undefined> = { source: () => processCpuMs(source.pid), client: ownCpuMs };
    if (options.targets.includes("engine")) targets.push(directTarget(source.ready, largest));

    const startPoolTarget = async (name: "pool" | "pool-baseline", sourceTree: string | undefined) => {
      const signingKey = { id: "bench-relay", secret: randomToken(48) };
      const pool = await startPoolProcess(
        {
          role: "pool",
          engineUrl: source.ready.url,
          engineKind: "openai",
          signingKey,
          // The pool never holds a stream back: room for every stream of the largest level.
          engineInFlight: largest,
          engineKvCapacityTokens: UNBOUNDED_KV_TOKENS,
          // Signatures are made just before each level, which lasts well under this.
          timestampWindowMs: 300_000,
          replayCapacity: 1_000_000,
        },
        { signal, sourceTree, ...(name === "pool" ? { cpuProfileDir: options.cpuProfileDir } : {}) },
      );
      stops.push({ name, stop: pool.stop });
      const key = poolCpuKey(name) ?? name;
      cpu[key] = () => processCpuMs(pool.pid);
      cpu[`${key}Wait`] = () => processRunQueueWaitMs(pool.pid);
      targets.push(poolRelayTarget(pool.ready, signingKey, largest, name));
      log(`${name === "pool" ? "pool core" : `baseline pool core (${sourceTree ?? ""})`}: ${pool.ready.url} (engine kind openai, maxInFlight ${largest})`);
    };
    if (options.targets.includes("pool") && options.baselinePoolTree !== undefined) await startPoolTarget("pool-baseline", options.baselinePoolTree);
    if (options.targets.includes("pool")) await startPoolTarget("pool", undefined);
    const measured = targets.map((target) => hooks.adjustTarget?.(target) ?? target);
    for (const target of measured) stops.push({ name: `${target.label} client`, stop: () => target.dispatcher.close() });

    const run = async (target: RelayTarget, streams: number, phase: RelayRun["phase"]) => {
      signal?.throwIfAborted();
      const tokens = phase === "warmup" ? WARMUP_TOKENS : options.tokens;
      const body = chatRequestBody({ model: source.ready.model, mode: "streaming", maxTokens: tokens });
      const streamHeaders = await target.prepare(streams, body);
      const expectedMs = tokens * options.intervalMs;
      const figures = await runRelayLevel({
        dispatcher: target.dispatcher,
        path: target.path,
        headers: target.headers,
        body,
        streamHeaders,
        streams,
        tokens,
        intervalMs: options.intervalMs,
        staggerMs: phase === "warmup" ? Math.max(options.intervalMs, streams * WARMUP_CONNECT_SPACING_MS) : options.intervalMs,
        // Generous: a saturated pool takes many seconds just to start its streams; only a hang should hit this.
        deadlineMs: 3 * expectedMs + 60_000,
        cpu,
        signal,
      });
      runs.push({ target: target.name, phase, figures, loadAverage: loadAverageNow() });
      const label = `${target.label.padEnd(6)} ${phase === "warmup" ? "warm-up" : `${streams} streams`}`.padEnd(20);
      const delivered = figures.deliveredTokensPerSecond;
      log(
        `${label} offered ${figures.offeredTokensPerSecond} tok/s, delivered ${delivered ?? "—"} tok/s, ` +
          `gap p99 ${figures.gapMs?.p99 ?? "—"} ms, ttft p99 ${figures.ttftMs?.p99 ?? "—"} ms` +
          (figures.failed > 0 ? `  FAILED ${figures.failed}/${streams}: ${Object.keys(figures.failureReasons).slice(0, 2).join("; ")}` : ""),
      );
    };

    for (const target of measured) await run(target, largest, "warmup");
    for (const [i, streams] of options.levels.entries()) {
      // Every other level in reverse order: the target run first at a level did better, whichever it was (README, issue 14's seventh pass).
      for (const target of i % 2 === 0 ? measured : [...measured].reverse()) await run(target, streams, "measure");
    }

    const { output: _output, ...recorded } = options;
    return {
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      machine: benchMachine(startLoad),
      options: recorded,
      targets: measured.map(({ name, label, description }) => ({ name, label, description })),
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
