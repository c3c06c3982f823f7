import { type Distribution, summarise } from "./distribution.js";
import type { RunResult } from "./run-result.js";

/*
 * Autellix's figures from one simulated run (pure).
 *
 * - Normalised latency: a program's response time (finish − arrival) divided by the
 *   tokens it generated on all its threads, in ms per token (for a parallel program
 *   that is its critical-path time over all threads' tokens). Mean, P95 and P99 over
 *   finished programs.
 * - Completion time: finish − arrival, over finished programs.
 * - Starvation indicator: the P99 completion time of the longest 10 % of programs by
 *   total work = prompt + generated tokens. Tokens, not service, so every policy is
 *   judged on the same programs (service depends on the policy's cache hits and
 *   batching). An unfinished program in that group counts with the lower bound of
 *   its completion time (end of run − arrival), so starving it cannot make the
 *   figure look better.
 * - Throughput over the run (first arrival to end of simulation): finished programs
 *   and generated tokens (of every program) per second.
 * - Prefix cache: Σ hit tokens / Σ queried tokens over engines (vLLM's counters).
 */

export interface RunMetrics {
  programs: number;
  finished: number;
  unfinished: number;
  /** ms per generated token; null when no program finished. */
  normalizedLatencyMsPerToken: Distribution | null;
  completionMs: Distribution | null;
  longestTenth: {
    /** How the group was chosen. */
    by: "prompt+generated tokens";
    programs: number;
    unfinished: number;
    /** P99 completion time of the group (unfinished ones at their lower bound). */
    completionP99Ms: number | null;
    completionMeanMs: number | null;
  };
  throughput: { spanMs: number; programsPerSec: number; tokensPerSec: number };
  prefixCache: { queriedTokens: number; hitTokens: number; hitRate: number | null };
  preemptions: number;
  /** Mean time a program's calls spent queued, summed per program, over finished programs. */
  queueMsMean: number | null;
  engineBusyFraction: number | null;
  simEndMs: number;
  wallMs: number;
  events: number;
  truncated: boolean;
}

export interface MetricsOptions {
  /**
   * Each program's total work in tokens (prompt + generated, from its spec). Without
   * it the records' own counts are used, which for an unfinished program are only
   * what it got so far.
   */
  workTokens?: ReadonlyMap<string, number>;
}

export const LONGEST_FRACTION = 0.1;

function finishedOf(result: RunResult) {
  return result.programs.filter((p) => Number.isFinite(p.finishMs));
}

function longestTenth(result: RunResult, options: MetricsOptions): RunMetrics["longestTenth"] {
  const work = (p: RunResult["programs"][number]) => options.workTokens?.get(p.programId) ?? p.promptTokens + p.generatedTokens;
  const ranked = [...result.programs].sort((a, b) => work(b) - work(a) || (a.programId < b.programId ? -1 : a.programId > b.programId ? 1 : 0));
  const group = ranked.slice(0, Math.ceil(ranked.length * LONGEST_FRACTION));
  const completion = group.map((p) => (Number.isFinite(p.finishMs) ? p.finishMs - p.arrivalMs : Math.max(0, result.simEndMs - p.arrivalMs)));
  const summary = summarise(completion);
  return {
    by: "prompt+generated tokens",
    programs: group.length,
    unfinished: group.filter((p) => !Number.isFinite(p.finishMs)).length,
    completionP99Ms: summary?.p99 ?? null,
    completionMeanMs: summary?.mean ?? null,
  };
}

export function computeRunMetrics(result: RunResult, options: MetricsOptions = {}): RunMetrics {
  const finished = finishedOf(result);
  const normalized = finished.filter((p) => p.generatedTokens > 0).map((p) => (p.finishMs - p.arrivalMs) / p.generatedTokens);
  const completion = finished.map((p) => p.finishMs - p.arrivalMs);

  const firstArrivalMs = result.programs.reduce((min, p) => Math.min(min, p.arrivalMs), Number.POSITIVE_INFINITY);
  const spanMs = result.programs.length === 0 ? 0 : Math.max(0, result.simEndMs - firstArrivalMs);
  const generated = result.programs.reduce((sum, p) => sum + p.generatedTokens, 0);
  const perSec = (n: number) => (spanMs > 0 ? (n * 1_000) / spanMs : 0);

  const queriedTokens = result.engines.reduce((sum, e) => sum + e.prefixCacheQueries, 0);
  const hitTokens = result.engines.reduce((sum, e) => sum + e.prefixCacheHits, 0);
  const busyMs = result.engines.reduce((sum, e) => sum + e.busyMs, 0);

  return {
    programs: result.programs.length,
    finished: finished.length,
    unfinished: result.programs.length - finished.length,
    normalizedLatencyMsPerToken: summarise(normalized),
    completionMs: summarise(completion),
    longestTenth: longestTenth(result, options),
    throughput: { spanMs, programsPerSec: perSec(finished.length), tokensPerSec: perSec(generated) },
    prefixCache: { queriedTokens, hitTokens, hitRate: queriedTokens > 0 ? hitTokens / queriedTokens : null },
    preemptions: result.engines.reduce((sum, e) => sum + e.preemptions, 0),
    queueMsMean: finished.length > 0 ? finished.reduce((sum, p) => sum + p.queueMs, 0) / finished.length : null,
    engineBusyFraction: result.engines.length > 0 && result.simEndMs > 0 ? busyMs / (result.engines.length * result.simEndMs) : null,
    simEndMs: result.simEndMs,
    wallMs: result.wallMs,
    events: result.events,
    truncated: result.truncated,
  };
}

/** Per-program normalised latencies (ms per token) of finished programs, for a CDF. */
export function normalizedLatencies(result: RunResult): number[] {
  return finishedOf(result)
    .filter((p) => p.generatedTokens > 0)
    .map((p) => (p.finishMs - p.arrivalMs) / p.generatedTokens);
}
