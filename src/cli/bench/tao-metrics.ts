/*
 * The placement benchmark's figures of one simulation run (`npm run bench:tao`).
 * Times are virtual (the simulator's clock), in ms unless named otherwise:
 *   job latency   program arrival → its last call's finish;
 *   TTFT          a call's ready time (dependencies done + tool gap, when the client
 *                 sends it) → its first output token on the engine;
 *   call latency  ready → finish;
 *   decode tok/s  generated tokens per second of engine busy time (summed over
 *                 engines: how much each busy second produced), and per second of
 *                 the run (arrival of the first program to the last finish);
 *   hit rate      prompt tokens served from the engines' prefix caches / prompt
 *                 tokens looked up (vLLM's prefix_cache_hits / queries).
 */

import type { SimulationResult } from "../../sim/des/simulate.js";

export interface Summary {
  count: number;
  /** NaN when count is 0. */
  mean: number;
  p50: number;
  p99: number;
  max: number;
}

/** Nearest-rank quantiles of the finite values. */
export function summarise(values: readonly number[]): Summary {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const n = finite.length;
  if (n === 0) return { count: 0, mean: Number.NaN, p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const at = (q: number) => finite[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))] as number;
  return { count: n, mean: finite.reduce((a, b) => a + b, 0) / n, p50: at(0.5), p99: at(0.99), max: finite[n - 1] as number };
}

export interface RunMetrics {
  programs: number;
  unfinished: number;
  calls: number;
  jobLatencyMs: Summary;
  ttftMs: Summary;
  callLatencyMs: Summary;
  generatedTokens: number;
  /** Generated tokens per second of engine busy time. */
  decodeTokPerBusySec: number;
  /** Generated tokens per second of simulated time. */
  decodeTokPerSec: number;
  prefixHitRate: number;
  preemptions: number;
  simEndMs: number;
  /** The simulator's own wall time for the run. */
  wallMs: number;
}

export function runMetrics(result: SimulationResult): RunMetrics {
  const calls = result.calls;
  if (calls === undefined) throw new Error("the placement benchmark needs call records (recordCalls: true)");
  const finished = result.programs.filter((p) => Number.isFinite(p.finishMs));
  const busyMs = result.engines.reduce((sum, e) => sum + e.busyMs, 0);
  const generated = result.engines.reduce((sum, e) => sum + e.generationTokens, 0);
  const queries = result.engines.reduce((sum, e) => sum + e.prefixCacheQueries, 0);
  const hits = result.engines.reduce((sum, e) => sum + e.prefixCacheHits, 0);
  const firstArrival = result.programs.reduce((min, p) => Math.min(min, p.arrivalMs), Number.POSITIVE_INFINITY);
  const spanMs = result.simEndMs - (Number.isFinite(firstArrival) ? firstArrival : 0);
  return {
    programs: result.programs.length,
    unfinished: result.programs.length - finished.length,
    calls: calls.length,
    jobLatencyMs: summarise(finished.map((p) => p.finishMs - p.arrivalMs)),
    ttftMs: summarise(calls.map((c) => c.firstTokenMs - c.readyMs)),
    callLatencyMs: summarise(calls.map((c) => c.finishMs - c.readyMs)),
    generatedTokens: generated,
    decodeTokPerBusySec: busyMs > 0 ? generated / (busyMs / 1_000) : Number.NaN,
    decodeTokPerSec: spanMs > 0 ? generated / (spanMs / 1_000) : Number.NaN,
    prefixHitRate: queries > 0 ? hits / queries : Number.NaN,
    preemptions: result.engines.reduce((sum, e) => sum + e.preemptions, 0),
    simEndMs: result.simEndMs,
    wallMs: result.wallMs,
  };
}

export interface PlanTiming {
  plans: number;
  meanMs: number;
  p95Ms: number;
  maxMs: number;
}

/** Wall time per plan (nearest-rank p95). */
export function planTiming(samples: readonly number[]): PlanTiming {
  const sorted = [...samples].sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return { plans: 0, meanMs: Number.NaN, p95Ms: Number.NaN, maxMs: Number.NaN };
  return {
    plans: n,
    meanMs: sorted.reduce((a, b) => a + b, 0) / n,
    p95Ms: sorted[Math.min(n - 1, Math.ceil(0.95 * n) - 1)] as number,
    maxMs: sorted[n - 1] as number,
  };
}
