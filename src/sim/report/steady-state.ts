import type { CallRecord, SimulationResult } from "../des/simulate.js";
import type { RunSample, StepFigures } from "../des/observer.js";
import { type Distribution, mean, summarise } from "./distribution.js";

/*
 * Steady-state figures of one simulated run at one arrival rate (pure).
 *
 * The run's programs arrive as a Poisson stream in three parts, by arrival order:
 * warm-up (the system fills; excluded), measured, and cool-down (arrivals go on so
 * the measured programs finish under the same load; excluded). The measurement
 * window is the measured programs' arrival span, [first measured arrival, first
 * cool-down arrival). The run ends once every measured program has finished (or at
 * a time cap; those left are "unfinished").
 *
 * - Latency: Autellix's normalised latency (finish − arrival) ÷ generated tokens, of
 *   the measured programs. An unfinished one counts at a lower bound, (end of run −
 *   arrival) ÷ its planned output tokens, and the figure is then marked as a bound.
 * - Throughput: programs finishing inside the window ÷ its length.
 * - Stability: the rate is sustained only if the system is not filling up. Over the
 *   window, the least-squares growth (slope × window length) of the backlog and of
 *   the calls waiting (pool queue + engines' own queues) must stay under a share
 *   (default 5 %) of the programs that arrived in the window, the median slowdown
 *   (completion time ÷ the program's unloaded duration, so a third with more long
 *   programs does not look slower) of the window's last third of measured programs
 *   must stay under a factor (default 1.5) of its first third's, and every measured
 *   program must finish. A rate that
 *   fails is not sustained, whatever its mean. The backlog is the programs in the
 *   system beyond those the same arrivals would leave there if every program ran
 *   alone (its unloaded duration: the critical path of its tool gaps and its calls'
 *   engine time at batch 1): a workload whose programs last longer than the warm-up
 *   is still filling up with programs in their tool phases during the window, which
 *   is not overload, and would otherwise look like a growing queue. And the window
 *   must last at least twice the measured programs' median unloaded duration: a
 *   shorter one (a high rate for the number of programs) is a burst, not a steady
 *   state, and says nothing either way.
 * - Engagement (did program-level ordering decide anything?): of the calls issued in
 *   the window, the share held in the pool queue longer than HELD_EPSILON_MS, the
 *   mean and P99 hold, promotions by the anti-starvation rule; per engine, the
 *   time-weighted mean batch, mean and max KV use, preemptions, busy share.
 * - Capacity: programs finished in the window ÷ the engines' busy share in it, i.e.
 *   what the engines would complete if they were never idle at this run's batching.
 */

/** A call counts as held when it waited in the pool queue longer than this. */
export const HELD_EPSILON_MS = 1;

export interface WindowSpec {
  /** Share of the programs (first by arrival) that only warm the system up. */
  warmupFraction: number;
  /** Share of the programs (last by arrival) that only keep the load on while the measured ones finish. */
  cooldownFraction: number;
}

export const DEFAULT_WINDOW_SPEC: WindowSpec = Object.freeze({ warmupFraction: 0.2, cooldownFraction: 0.2 });

export interface StabilitySettings {
  /** Growth over the window, as a share of the programs that arrived in it, above which the backlog is growing. */
  maxGrowthShare: number;
  /** Last third's median slowdown over the first third's, above which latency is growing. */
  maxLatencyGrowth: number;
  /** Fewer finished programs than this in a third: the latency test is skipped (too few to say). */
  minProgramsPerThird: number;
  /** The window must last this many times the measured programs' median unloaded duration. */
  minWindowDurations: number;
}

export const DEFAULT_STABILITY: StabilitySettings = Object.freeze({ maxGrowthShare: 0.05, maxLatencyGrowth: 1.5, minProgramsPerThird: 8, minWindowDurations: 2 });

export interface ProgramWindow {
  warmup: number;
  measured: number;
  cooldown: number;
  startMs: number;
  endMs: number;
  /** Measured programs' ids, in arrival order. */
  measuredIds: string[];
}

interface Arriving {
  programId: string;
  arrivalMs: number;
}

/** Splits programs (any order) into warm-up, measured and cool-down by arrival; the window is the measured ones' arrival span. */
export function programWindow(programs: readonly Arriving[], spec: WindowSpec = DEFAULT_WINDOW_SPEC): ProgramWindow {
  const { warmupFraction, cooldownFraction } = spec;
  if (!(warmupFraction >= 0 && cooldownFraction >= 0 && warmupFraction + cooldownFraction < 1)) {
    throw new RangeError(`warm-up and cool-down shares must be >= 0 and leave programs to measure, got ${warmupFraction} and ${cooldownFraction}`);
  }
  const sorted = [...programs].sort((a, b) => a.arrivalMs - b.arrivalMs);
  const n = sorted.length;
  const warmup = Math.floor(n * warmupFraction);
  const cooldown = Math.floor(n * cooldownFraction);
  const measured = n - warmup - cooldown;
  if (measured < 2) throw new RangeError(`too few programs to measure: ${n} programs leave ${measured} after warm-up and cool-down`);
  const first = sorted[warmup] as Arriving;
  const last = sorted[warmup + measured - 1] as Arriving;
  const next = sorted[warmup + measured];
  // Without a cool-down the window ends one mean inter-arrival gap after the last measured arrival.
  const meanGap = (last.arrivalMs - first.arrivalMs) / (measured - 1);
  const endMs = next !== undefined && next.arrivalMs > last.arrivalMs ? next.arrivalMs : last.arrivalMs + meanGap;
  if (!(endMs > first.arrivalMs)) throw new RangeError("the measured programs all arrive at one instant: no window to measure over");
  return { warmup, measured, cooldown, startMs: first.arrivalMs, endMs, measuredIds: sorted.slice(warmup, warmup + measured).map((p) => p.programId) };
}

export interface Trend {
  /** Mean over the window's first and last thirds (by time). */
  firstThirdMean: number;
  lastThirdMean: number;
  /** Least-squares slope, per second. */
  slopePerSec: number;
  /** slope × window length: how much the series grew across the window. */
  growth: number;
}

/** Trend of a time series inside [startMs, endMs]; null with fewer than 3 points there. */
export function trend(points: readonly { atMs: number; value: number }[], startMs: number, endMs: number): Trend | null {
  const inside = points.filter((p) => p.atMs >= startMs && p.atMs <= endMs);
  if (inside.length < 3) return null;
  const span = endMs - startMs;
  const thirdMean = (from: number, to: number): number => {
    const values = inside.filter((p) => p.atMs >= from && p.atMs <= to).map((p) => p.value);
    return values.length === 0 ? Number.NaN : mean(values);
  };
  const tMean = mean(inside.map((p) => p.atMs));
  const vMean = mean(inside.map((p) => p.value));
  let sxy = 0;
  let sxx = 0;
  for (const p of inside) {
    sxy += (p.atMs - tMean) * (p.value - vMean);
    sxx += (p.atMs - tMean) ** 2;
  }
  const slopePerMs = sxx > 0 ? sxy / sxx : 0;
  return {
    firstThirdMean: thirdMean(startMs, startMs + span / 3),
    lastThirdMean: thirdMean(endMs - span / 3, endMs),
    slopePerSec: slopePerMs * 1_000,
    growth: slopePerMs * span,
  };
}

export interface LatencyTrend {
  /** What was compared: slowdown (completion ÷ unloaded duration), or normalised latency when unloaded durations are unknown. */
  measure: "slowdown" | "ms/token";
  firstThirdMedian: number;
  lastThirdMedian: number;
  /** last ÷ first. */
  ratio: number;
  /** False when a third had too few finished programs to compare. */
  tested: boolean;
}

export interface Stability {
  stable: boolean;
  /** Why not, in words (empty when stable). */
  reasons: string[];
  backlog: Trend | null;
  waitingCalls: Trend | null;
  latency: LatencyTrend | null;
  /** Measured programs that had not finished when the run ended. */
  unfinished: number;
}

function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export interface StabilityInput {
  samples: readonly RunSample[];
  /** Every program's arrival and unloaded duration, for the backlog's baseline; absent: programs in the system as they are. */
  unloaded?: readonly { arrivalMs: number; durationMs: number }[];
  window: Pick<ProgramWindow, "startMs" | "endMs">;
  /** Programs that arrived inside the window (the measured ones). */
  arrivals: number;
  /** Measured programs by arrival: the latency compared (see LatencyTrend.measure), or null when unfinished. */
  measured: readonly { arrivalMs: number; latency: number | null }[];
  latencyMeasure?: LatencyTrend["measure"];
  /** Median unloaded duration of the measured programs; absent: the window's length is not checked. */
  medianUnloadedMs?: number;
}

/** Is the system keeping up at this rate? See the file comment for the rule. */
export function assessStability(input: StabilityInput, settings: StabilitySettings = DEFAULT_STABILITY): Stability {
  const { startMs, endMs } = input.window;
  const reasons: string[] = [];
  const limit = settings.maxGrowthShare * input.arrivals;
  const alone = (atMs: number): number => {
    let n = 0;
    for (const p of input.unloaded ?? []) if (p.arrivalMs <= atMs && atMs < p.arrivalMs + p.durationMs) n += 1;
    return n;
  };
  const backlog = trend(
    input.samples.filter((s) => s.atMs >= startMs && s.atMs <= endMs).map((s) => ({ atMs: s.atMs, value: s.programsInSystem - alone(s.atMs) })),
    startMs,
    endMs,
  );
  const waitingCalls = trend(
    input.samples.map((s) => ({ atMs: s.atMs, value: s.poolQueued + s.engineWaiting })),
    startMs,
    endMs,
  );
  const pct = `${Math.round(settings.maxGrowthShare * 100)} %`;
  if (backlog !== null && backlog.growth > limit) {
    reasons.push(`the backlog (programs in the system beyond running alone) grew by ${backlog.growth.toFixed(0)} across the window (> ${pct} of its ${input.arrivals} arrivals)`);
  }
  if (waitingCalls !== null && waitingCalls.growth > limit) {
    reasons.push(`calls waiting (pool + engines) grew by ${waitingCalls.growth.toFixed(0)} across the window (> ${pct} of its ${input.arrivals} arrivals)`);
  }
  if (input.medianUnloadedMs !== undefined && endMs - startMs < settings.minWindowDurations * input.medianUnloadedMs) {
    reasons.push(
      `the window (${((endMs - startMs) / 1_000).toFixed(0)} s) is shorter than ${settings.minWindowDurations}× the median program's unloaded duration (${(input.medianUnloadedMs / 1_000).toFixed(0)} s): a burst, not a steady state (more programs would tell)`,
    );
  }
  const unfinished = input.measured.filter((p) => p.latency === null).length;
  if (unfinished > 0) reasons.push(`${unfinished} measured programs unfinished when the run ended`);

  const span = endMs - startMs;
  const third = (from: number, to: number) => input.measured.filter((p) => p.arrivalMs >= from && p.arrivalMs < to && p.latency !== null).map((p) => p.latency as number);
  const first = third(startMs, startMs + span / 3);
  const last = third(endMs - span / 3, endMs + 1e-9);
  let latency: LatencyTrend | null = null;
  if (first.length > 0 && last.length > 0) {
    const firstThirdMedian = median(first);
    const lastThirdMedian = median(last);
    const tested = first.length >= settings.minProgramsPerThird && last.length >= settings.minProgramsPerThird;
    const measure = input.latencyMeasure ?? "ms/token";
    latency = { measure, firstThirdMedian, lastThirdMedian, ratio: lastThirdMedian / firstThirdMedian, tested };
    if (tested && latency.ratio > settings.maxLatencyGrowth) {
      reasons.push(`the median ${measure === "slowdown" ? "slowdown" : "normalised latency"} of the window's last third is ${latency.ratio.toFixed(2)}× its first third's (> ${settings.maxLatencyGrowth}×)`);
    }
  }
  return { stable: reasons.length === 0, reasons, backlog, waitingCalls, latency, unfinished };
}

/** Figures of a group of measured programs (all of them, one kind, one tenant). */
export interface GroupMetrics {
  programs: number;
  finished: number;
  /** Over finished programs. */
  normalizedLatencyMsPerToken: Distribution | null;
  /** Mean over all measured programs, unfinished ones at their lower bound; equals the finished mean when all finished. */
  meanMsPerToken: number | null;
  /** True when meanMsPerToken counts unfinished programs at a lower bound. */
  meanIsLowerBound: boolean;
  completionMs: Distribution | null;
  /** Mean over finished programs of completion ÷ the program's unloaded duration (its time alone); null when unknown. */
  meanSlowdown: number | null;
  /** Calls of these programs issued in the window, and how many were held in the pool queue. */
  calls: number;
  heldCalls: number;
  heldShare: number | null;
  holdMeanMs: number | null;
  holdP99Ms: number | null;
  promotedCalls: number;
}

export interface EngineWindow {
  engineId: string;
  busyShare: number;
  meanBatch: number | null;
  maxBatch: number;
  meanKv: number;
  maxKv: number;
  preemptions: number;
}

export interface Engagement {
  /** Calls issued (ready) in the window. */
  calls: number;
  heldCalls: number;
  heldShare: number | null;
  /** Pool hold over all calls of the window (0 for those sent at once). */
  holdMeanMs: number | null;
  holdP99Ms: number | null;
  /** Over the held calls only. */
  heldMeanMs: number | null;
  promotedCalls: number;
  /** Means over the engines of the per-engine figures; maxKv and maxBatch: the highest. */
  meanBatch: number | null;
  maxBatch: number;
  meanKv: number;
  maxKv: number;
  busyShare: number;
  preemptions: number;
  engines: EngineWindow[];
}

export interface SteadyStateMetrics {
  window: Omit<ProgramWindow, "measuredIds">;
  arrivalsPerSec: number;
  /** Programs (any) that finished inside the window, per second. */
  completionsPerSec: number;
  overall: GroupMetrics;
  byKind: Record<string, GroupMetrics>;
  byTenant: Record<string, GroupMetrics>;
  stability: Stability;
  engagement: Engagement;
  /** Programs finished in the window ÷ mean engine busy share in it (null when the engines never worked). */
  capacityPerSec: number | null;
  /** Cached ÷ prompt tokens of the calls that finished in the window. */
  cacheHitRate: number | null;
  /** P99 completion of the longest 10 % of measured programs by prompt + generated tokens (unfinished at their lower bound). */
  longestTenthP99Ms: number | null;
  longestTenthUnfinished: number;
  endedBy: SimulationResult["endedBy"];
  simEndMs: number;
  wallMs: number;
  events: number;
}

export type SteadyStateRun = Pick<SimulationResult, "programs" | "engines" | "simEndMs" | "wallMs" | "events" | "endedBy" | "samples" | "calls">;

export interface SteadyStateOptions {
  window: ProgramWindow;
  /** Each program's planned output tokens and total work (prompt + output tokens), from its spec. */
  plannedOutputTokens: ReadonlyMap<string, number>;
  workTokens: ReadonlyMap<string, number>;
  /** Each program's duration if it ran alone (StabilityInput.unloaded); absent: the backlog is programs in the system. */
  unloadedDurationMs?: ReadonlyMap<string, number>;
  stability?: StabilitySettings;
}

/** P99 of a sample (nearest rank); null when empty. */
function p99(values: readonly number[]): number | null {
  return summarise(values)?.p99 ?? null;
}

interface MeasuredProgram {
  programId: string;
  kind: string;
  tenantId: string;
  arrivalMs: number;
  finished: boolean;
  /** Finished: actual; unfinished: lower bound. */
  msPerToken: number;
  completionMs: number;
  /** Completion ÷ unloaded duration, when finished and the unloaded duration is known. */
  slowdown: number | null;
}

/** Tenant of a program record without one (the simulator's default tenant's name is not needed here). */
export const UNTENANTED = "(none)";

function groupMetrics(programs: readonly MeasuredProgram[], calls: readonly { hold: number; held: boolean; promoted: boolean }[]): GroupMetrics {
  const finished = programs.filter((p) => p.finished);
  const holds = calls.map((c) => c.hold);
  const held = calls.filter((c) => c.held);
  return {
    programs: programs.length,
    finished: finished.length,
    normalizedLatencyMsPerToken: summarise(finished.map((p) => p.msPerToken)),
    meanMsPerToken: programs.length === 0 ? null : mean(programs.map((p) => p.msPerToken)),
    meanIsLowerBound: finished.length < programs.length,
    completionMs: summarise(finished.map((p) => p.completionMs)),
    meanSlowdown: (() => {
      const known = finished.flatMap((p) => (p.slowdown === null ? [] : [p.slowdown]));
      return known.length === 0 ? null : mean(known);
    })(),
    calls: calls.length,
    heldCalls: held.length,
    heldShare: calls.length === 0 ? null : held.length / calls.length,
    holdMeanMs: calls.length === 0 ? null : mean(holds),
    holdP99Ms: p99(holds),
    promotedCalls: calls.filter((c) => c.promoted).length,
  };
}

function engineWindow(engineId: string, figures: StepFigures, spanMs: number): EngineWindow {
  return {
    engineId,
    busyShare: figures.busyMs / spanMs,
    meanBatch: figures.busyMs > 0 ? figures.batchMs / figures.busyMs : null,
    maxBatch: figures.batchMax,
    meanKv: figures.kvMs / spanMs,
    maxKv: figures.kvMax,
    preemptions: figures.preemptions,
  };
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = groups.get(k);
    if (list === undefined) groups.set(k, [item]);
    else list.push(item);
  }
  return new Map([...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export function computeSteadyState(run: SteadyStateRun, options: SteadyStateOptions): SteadyStateMetrics {
  const { window } = options;
  const { startMs, endMs } = window;
  const spanMs = endMs - startMs;
  const inWindow = (t: number) => t >= startMs && t < endMs;
  const measuredIds = new Set(window.measuredIds);
  const byId = new Map(run.programs.map((p) => [p.programId, p]));

  const measured: MeasuredProgram[] = window.measuredIds.map((id) => {
    const p = byId.get(id);
    if (p === undefined) throw new RangeError(`measured program ${id} is not in the run`);
    const finished = Number.isFinite(p.finishMs);
    const planned = options.plannedOutputTokens.get(id) ?? Math.max(1, p.generatedTokens);
    const completionMs = (finished ? p.finishMs : run.simEndMs) - p.arrivalMs;
    const alone = options.unloadedDurationMs?.get(id);
    return {
      programId: id,
      kind: p.kind,
      tenantId: p.tenantId ?? UNTENANTED,
      arrivalMs: p.arrivalMs,
      finished,
      msPerToken: finished ? completionMs / Math.max(1, p.generatedTokens) : Math.max(0, completionMs) / planned,
      completionMs,
      slowdown: finished && alone !== undefined && alone > 0 ? completionMs / alone : null,
    };
  });
  const measuredById = new Map(measured.map((p) => [p.programId, p]));

  // Calls issued in the window (of any program): the pool's hold and promotions.
  const calls = (run.calls ?? []).filter((c) => inWindow(c.readyMs));
  const callFigures = calls.map((c: CallRecord) => {
    const dispatched = Number.isFinite(c.dispatchMs);
    const hold = (dispatched ? c.dispatchMs : run.simEndMs) - c.readyMs;
    return { programId: c.programId, hold, held: hold > HELD_EPSILON_MS, promoted: dispatched && c.promoted };
  });
  const measuredCalls = callFigures.filter((c) => measuredIds.has(c.programId));
  const callGroupKey = (key: (p: MeasuredProgram) => string) => (c: { programId: string }) => key(measuredById.get(c.programId) as MeasuredProgram);

  const group = (key: (p: MeasuredProgram) => string): Record<string, GroupMetrics> => {
    const programGroups = groupBy(measured, key);
    const callGroups = groupBy(measuredCalls, callGroupKey(key));
    return Object.fromEntries([...programGroups.entries()].map(([k, programs]) => [k, groupMetrics(programs, callGroups.get(k) ?? [])]));
  };

  const overall = groupMetrics(measured, measuredCalls);
  const held = callFigures.filter((c) => c.held);
  const engines = run.engines.map((e) => engineWindow(e.engineId, e.window ?? { busyMs: 0, batchMs: 0, kvMs: 0, kvMax: 0, batchMax: 0, steps: 0, preemptions: 0 }, spanMs));
  const busyShare = engines.length === 0 ? 0 : mean(engines.map((e) => e.busyShare));
  const batches = engines.flatMap((e) => (e.meanBatch === null ? [] : [e.meanBatch]));
  const engagement: Engagement = {
    calls: callFigures.length,
    heldCalls: held.length,
    heldShare: callFigures.length === 0 ? null : held.length / callFigures.length,
    holdMeanMs: callFigures.length === 0 ? null : mean(callFigures.map((c) => c.hold)),
    holdP99Ms: p99(callFigures.map((c) => c.hold)),
    heldMeanMs: held.length === 0 ? null : mean(held.map((c) => c.hold)),
    promotedCalls: callFigures.filter((c) => c.promoted).length,
    meanBatch: batches.length === 0 ? null : mean(batches),
    maxBatch: engines.reduce((m, e) => Math.max(m, e.maxBatch), 0),
    meanKv: engines.length === 0 ? 0 : mean(engines.map((e) => e.meanKv)),
    maxKv: engines.reduce((m, e) => Math.max(m, e.maxKv), 0),
    busyShare,
    preemptions: engines.reduce((sum, e) => sum + e.preemptions, 0),
    engines,
  };

  const completed = run.programs.filter((p) => Number.isFinite(p.finishMs) && inWindow(p.finishMs)).length;
  const completionsPerSec = (completed * 1_000) / spanMs;
  const finishedCalls = (run.calls ?? []).filter((c) => Number.isFinite(c.finishMs) && inWindow(c.finishMs));
  const promptTokens = finishedCalls.reduce((sum, c) => sum + c.promptTokens, 0);
  const cachedTokens = finishedCalls.reduce((sum, c) => sum + c.cachedTokens, 0);

  const work = (p: MeasuredProgram) => options.workTokens.get(p.programId) ?? 0;
  const ranked = [...measured].sort((a, b) => work(b) - work(a) || (a.programId < b.programId ? -1 : 1));
  const longest = ranked.slice(0, Math.ceil(ranked.length * 0.1));

  const stability = assessStability(
    {
      samples: run.samples ?? [],
      ...(options.unloadedDurationMs === undefined
        ? {}
        : { unloaded: run.programs.map((p) => ({ arrivalMs: p.arrivalMs, durationMs: options.unloadedDurationMs?.get(p.programId) ?? 0 })) }),
      ...(options.unloadedDurationMs === undefined ? {} : { medianUnloadedMs: median(window.measuredIds.map((id) => options.unloadedDurationMs?.get(id) ?? 0)) }),
      window,
      arrivals: window.measured,
      measured: measured.map((p) => {
        const alone = options.unloadedDurationMs?.get(p.programId);
        const latency = alone !== undefined && alone > 0 ? p.completionMs / alone : p.msPerToken;
        return { arrivalMs: p.arrivalMs, latency: p.finished ? latency : null };
      }),
      latencyMeasure: options.unloadedDurationMs === undefined ? "ms/token" : "slowdown",
    },
    options.stability,
  );

  const { measuredIds: _ids, ...windowFigures } = window;
  return {
    window: windowFigures,
    arrivalsPerSec: (window.measured * 1_000) / spanMs,
    completionsPerSec,
    overall,
    byKind: group((p) => p.kind),
    byTenant: group((p) => p.tenantId),
    stability,
    engagement,
    capacityPerSec: busyShare > 0 ? completionsPerSec / busyShare : null,
    cacheHitRate: promptTokens > 0 ? cachedTokens / promptTokens : null,
    longestTenthP99Ms: p99(longest.map((p) => p.completionMs)),
    longestTenthUnfinished: longest.filter((p) => !p.finished).length,
    endedBy: run.endedBy,
    simEndMs: run.simEndMs,
    wallMs: run.wallMs,
    events: run.events,
  };
}
