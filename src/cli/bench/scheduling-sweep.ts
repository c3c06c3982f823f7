import { POLICIES, type PolicyName, POOL_DEFAULT_MAX_IN_FLIGHT } from "../../sim/des/policies.js";
import type { SimulationConfig, SimulationResult } from "../../sim/des/simulate.js";
import type { BatchRun, BenchReport, SweepPoint } from "../../sim/report/bench-report.js";
import { quantilePoints } from "../../sim/report/distribution.js";
import { sig3 } from "../../sim/report/format.js";
import { defaultSlo, meetsSlo, type RatePoint, type SustainedRate, sustainedRate, sustainedRatio } from "../../sim/report/headline.js";
import { computeRunMetrics, normalizedLatencies, type RunMetrics } from "../../sim/report/metrics.js";
import { DEFAULT_SEED, generatePrograms, type ProgramSpec, promptTokenCount, type Workload } from "../../sim/workload/index.js";
import { DEFAULTS, type SchedulingBenchOptions } from "./scheduling-options.js";
import type { BenchProgress } from "./scheduling-progress.js";

/*
 * The benchmark proper: every policy on the same programs, as an offline batch and
 * at a ladder of Poisson arrival rates, then the headline.
 *
 * The programs are generated once (Poisson at 1 program/s) and only their arrival
 * times are rescaled per rate (or zeroed for the batch). The generator's arrival
 * times scale exactly as 1/rate, so this is what it would give at each rate, and
 * every run sees the very same programs.
 *
 * Without --rates the ladder is built from a capacity estimate (batchCapacity) and
 * adapts:
 * - the baseline runs first; its lowest rate (capacity / 8, about unloaded) gives
 *   the default SLO;
 * - a policy that still meets the SLO at its top rate gets the rate doubled, a few
 *   times at most, and never past "batch-like" load (all programs arriving within
 *   the baseline's median program duration at its lowest rate: a higher rate would
 *   only approach the batch run, which is reported anyway);
 * - the interval where a policy crosses the SLO gets its geometric midpoint, so
 *   the interpolated crossing rests on close points.
 * Every policy also runs every rate of the baseline's ladder, so the curves compare.
 */

export type Simulate = (config: SimulationConfig) => SimulationResult;

export interface SweepDeps {
  simulate: Simulate;
  progress: BenchProgress;
  /** Wall clock in ms (performance.now()); only for the report's wall time. */
  now: () => number;
  /** ISO time the report is stamped with. */
  createdAt: string;
  /** Command line shown in the report. */
  command: string;
}

const FULL_LADDER = [1 / 8, 1 / 4, 1 / 2, 1, 2];
const QUICK_LADDER = [1 / 8, 1 / 2, 2];
/** Doublings above the ladder for a policy that still meets the SLO at its top. */
const MAX_EXTENSIONS = 4;
/** A crossing interval wider than this ratio gets its midpoint run (full mode). */
const REFINE_ABOVE_RATIO = 1.5;
const CDF_POINTS = 101;

/** Rounded to 3 significant digits so rates read well in tables. */
export function roundRate(rate: number): number {
  return Number(rate.toPrecision(3));
}

export function ladderAround(capacityPerSec: number, quick: boolean): number[] {
  return [...new Set((quick ? QUICK_LADDER : FULL_LADDER).map((f) => roundRate(capacityPerSec * f)))].filter((r) => r > 0).sort((a, b) => a - b);
}

/**
 * Programs per second the engines could complete if they were never idle: finished
 * programs ÷ the batch's busy time per engine. In a batch every engine holds a full
 * batch while it works, so this is near the saturated throughput; the batch's
 * makespan is not used because a few long programs' own critical paths (tool time)
 * set it, not the engines.
 */
export function batchCapacity(result: Pick<SimulationResult, "programs" | "engines">): number {
  const finished = result.programs.filter((p) => Number.isFinite(p.finishMs)).length;
  const busyPerEngineMs = result.engines.reduce((sum, e) => sum + e.busyMs, 0) / Math.max(1, result.engines.length);
  if (finished === 0 || !(busyPerEngineMs > 0)) {
    throw new Error("cannot estimate capacity: the baseline's batch run finished no program (give --rates)");
  }
  return (finished * 1_000) / busyPerEngineMs;
}

/** The programs with tool / think time scaled (0: Autellix's stress setting, no gaps). */
export function scaleGaps(programs: readonly ProgramSpec[], scale: number): ProgramSpec[] {
  if (scale === 1) return [...programs];
  return programs.map((p) => ({ ...p, calls: p.calls.map((c) => ({ ...c, gapBeforeMs: c.gapBeforeMs * scale })) }));
}

/** --programs, else the workload's own count capped at the default size. */
export function programsPerRun(options: Pick<SchedulingBenchOptions, "programs" | "quick">, workload: Workload): number {
  if (options.programs !== undefined) return options.programs;
  const cap = options.quick ? DEFAULTS.quickPrograms : DEFAULTS.programs;
  return Math.min(cap, workload.programs.count ?? cap);
}

function withArrivals(programs: readonly ProgramSpec[], arrivalMs: (p: ProgramSpec) => number): ProgramSpec[] {
  return programs.map((p) => ({ ...p, arrivalMs: arrivalMs(p) }));
}

function workTokens(programs: readonly ProgramSpec[]): Map<string, number> {
  return new Map(programs.map((p) => [p.programId, p.calls.reduce((sum, c) => sum + promptTokenCount(c) + c.outputTokens, 0)]));
}

function runSummary(m: RunMetrics): string {
  const mean = m.normalizedLatencyMsPerToken?.mean;
  return `${m.finished}/${m.programs} finished, mean ${sig3(mean)} ms/tok, ${sig3(m.simEndMs / 1_000)} s simulated, ${sig3(m.wallMs / 1_000)} s wall`;
}

interface RunOutput {
  metrics: RunMetrics;
  cdf: { q: number; value: number }[];
}

/** Runs one simulation per (policy, arrival) and keeps what the report needs. */
class Runs {
  private readonly byPolicy = new Map<PolicyName, Map<number, RunOutput>>();
  private readonly work: Map<string, number>;

  constructor(
    private readonly programs: readonly ProgramSpec[],
    private readonly config: Omit<SimulationConfig, "programs" | "policy" | "onProgress">,
    private readonly deps: SweepDeps,
  ) {
    this.work = workTokens(programs);
  }

  /** The batch run (everything at t = 0); returns the raw result too, for the capacity estimate. */
  batch(policy: PolicyName): { result: SimulationResult; metrics: RunMetrics } {
    const { result, metrics } = this.simulate(policy, withArrivals(this.programs, () => 0), `${policy} batch`);
    return { result, metrics };
  }

  /** Runs the rate unless it already ran. */
  ensure(policy: PolicyName, rate: number): void {
    const runs = this.byPolicy.get(policy) ?? new Map<number, RunOutput>();
    this.byPolicy.set(policy, runs);
    if (runs.has(rate)) return;
    const { metrics, cdf } = this.simulate(policy, withArrivals(this.programs, (p) => p.arrivalMs / rate), `${policy} @ ${sig3(rate)} prog/s`);
    runs.set(rate, { metrics, cdf });
  }

  has(policy: PolicyName, rate: number): boolean {
    return this.byPolicy.get(policy)?.has(rate) ?? false;
  }

  points(policy: PolicyName): RatePoint[] {
    return this.sorted(policy).map(([ratePerSec, out]) => ({
      ratePerSec,
      meanMsPerToken: out.metrics.normalizedLatencyMsPerToken?.mean ?? null,
      unfinished: out.metrics.unfinished,
    }));
  }

  sweepPoints(policy: PolicyName): SweepPoint[] {
    return this.sorted(policy).map(([ratePerSec, out]) => ({ ratePerSec, metrics: out.metrics }));
  }

  output(policy: PolicyName, rate: number): RunOutput | undefined {
    return this.byPolicy.get(policy)?.get(rate);
  }

  private sorted(policy: PolicyName): [number, RunOutput][] {
    return [...(this.byPolicy.get(policy) ?? new Map<number, RunOutput>()).entries()].sort(([a], [b]) => a - b);
  }

  private simulate(policy: PolicyName, programs: ProgramSpec[], label: string): RunOutput & { result: SimulationResult } {
    this.deps.progress.startRun(label, programs.length);
    const result = this.deps.simulate({ ...this.config, programs, policy, onProgress: (p) => this.deps.progress.update(p) });
    const metrics = computeRunMetrics(result, { workTokens: this.work });
    this.deps.progress.endRun(runSummary(metrics));
    return { result, metrics, cdf: quantilePoints(normalizedLatencies(result), CDF_POINTS) };
  }
}

export function runSchedulingSweep(options: SchedulingBenchOptions, workloadSource: string, workload: Workload, deps: SweepDeps): BenchReport {
  const started = deps.now();
  const seed = options.seed ?? workload.seed ?? DEFAULT_SEED;
  const policies = options.policies;
  const baseline: PolicyName = policies.includes("fcfs-rr") ? "fcfs-rr" : (policies[0] as PolicyName);
  // The baseline runs first everywhere: the ladder and the SLO come from it.
  const order: PolicyName[] = [baseline, ...policies.filter((p) => p !== baseline)];

  const unitRate: Workload = { ...workload, arrival: { process: "poisson", ratePerSec: 1 } };
  const programs = scaleGaps(generatePrograms(unitRate, { seed, count: programsPerRun(options, workload) }), options.gapScale);
  // The workload's tenant weights drive the pool's fair share (a weight-0 tenant never appears).
  const tenantWeights = Object.fromEntries((workload.tenants ?? []).filter((t) => t.weight > 0).map((t) => [t.id, t.weight]));
  const runs = new Runs(
    programs,
    {
      engines: options.engines,
      engineProfile: options.engineProfile,
      maxSimMs: options.maxSimMs,
      tenantWeights,
      ...(options.maxInFlightPerEngine === undefined ? {} : { maxInFlightPerEngine: options.maxInFlightPerEngine }),
    },
    deps,
  );
  const adaptive = options.rates === undefined;
  deps.progress.addRuns(policies.length * (1 + (options.rates?.length ?? (options.quick ? QUICK_LADDER : FULL_LADDER).length)));

  // Offline batch: everything at t = 0.
  const batch = new Map<PolicyName, BatchRun>();
  let capacityEstimatePerSec: number | null = null;
  for (const policy of order) {
    const { result, metrics } = runs.batch(policy);
    const makespanMs = (metrics.unfinished === 0 ? metrics.completionMs?.max : undefined) ?? null;
    batch.set(policy, { policy, makespanMs, metrics });
    if (policy === baseline && adaptive) capacityEstimatePerSec = batchCapacity(result);
  }

  let ladder: number[];
  if (options.rates !== undefined) {
    ladder = options.rates;
  } else {
    if (capacityEstimatePerSec === null) throw new Error("unreachable: no capacity estimate");
    ladder = ladderAround(capacityEstimatePerSec, options.quick);
    deps.progress.addRuns(policies.length * (ladder.length - (options.quick ? QUICK_LADDER : FULL_LADDER).length));
  }

  // The baseline's ladder, then the SLO from its lowest rate.
  for (const rate of ladder) runs.ensure(baseline, rate);
  const slo: BenchReport["slo"] =
    options.sloMsPerToken !== undefined
      ? { msPerToken: options.sloMsPerToken, source: "user", explanation: "given with --slo-ms-per-token" }
      : {
          msPerToken: defaultSlo(runs.points(baseline), options.sloFactor),
          source: "default",
          explanation: `${sig3(options.sloFactor)}× ${baseline}'s mean at the lowest rate, ${sig3(ladder[0])} prog/s`,
        };

  // Beyond this rate all programs arrive within a typical program's unloaded duration.
  const unloadedMedianMs = runs.output(baseline, ladder[0] as number)?.metrics.completionMs?.p50 ?? null;
  const batchLikeRate = unloadedMedianMs !== null && unloadedMedianMs > 0 ? (programs.length * 1_000) / unloadedMedianMs : Number.POSITIVE_INFINITY;
  const notes: string[] = [];

  const extend = (policy: PolicyName): void => {
    for (let i = 0; i < MAX_EXTENSIONS; i++) {
      const points = runs.points(policy);
      if (sustainedRate(points, slo.msPerToken).relation !== ">=") return;
      const next = roundRate((points[points.length - 1] as RatePoint).ratePerSec * 2);
      if (next > batchLikeRate) return;
      deps.progress.addRuns(1);
      runs.ensure(policy, next);
      // Every later policy runs the baseline's extended ladder too.
      if (policy === baseline) {
        ladder = [...ladder, next];
        deps.progress.addRuns(order.length - 1);
      }
    }
  };
  const refine = (policy: PolicyName): void => {
    const points = runs.points(policy);
    const missIndex = points.findIndex((p) => !meetsSlo(p, slo.msPerToken));
    if (missIndex <= 0) return;
    const low = (points[missIndex - 1] as RatePoint).ratePerSec;
    const high = (points[missIndex] as RatePoint).ratePerSec;
    if (high / low <= REFINE_ABOVE_RATIO) return;
    const mid = roundRate(Math.sqrt(low * high));
    if (runs.has(policy, mid)) return;
    deps.progress.addRuns(1);
    runs.ensure(policy, mid);
  };

  for (const policy of order) {
    for (const rate of ladder) runs.ensure(policy, rate);
    if (!adaptive) continue;
    extend(policy);
    if (!options.quick) refine(policy);
  }

  // Distributions are compared at the highest rate the baseline still sustains: it
  // is still acceptable there, and differences between policies start to matter.
  // That rate may be the baseline's own midpoint: every policy runs it then.
  const baselinePoints = runs.points(baseline);
  const met = baselinePoints.filter((p) => meetsSlo(p, slo.msPerToken));
  const cdfRate = met.length > 0 ? (met[met.length - 1] as RatePoint).ratePerSec : (baselinePoints[0] as RatePoint).ratePerSec;
  const cdfWhy = met.length > 0 ? `the highest rate at which ${baseline} meets the SLO` : `the lowest rate: ${baseline} misses the SLO at every rate`;
  for (const policy of order) {
    if (runs.has(policy, cdfRate)) continue;
    deps.progress.addRuns(1);
    runs.ensure(policy, cdfRate);
  }

  const sustained = new Map<PolicyName, SustainedRate>(order.map((p) => [p, sustainedRate(runs.points(p), slo.msPerToken)]));
  const baselineSustained = sustained.get(baseline) as SustainedRate;
  if (baselineSustained.relation === ">=") {
    const nearBatch = roundRate(baselineSustained.ratePerSec * 2) > batchLikeRate ? " (near batch-like load for this many programs)" : "";
    const remedies = ["raise --programs", "lower --engines", ...(options.gapScale > 0 ? ["scale tool time down (--gap-scale 0 is Autellix's stress setting)"] : []), "or tighten the SLO"];
    notes.push(
      `${baseline} met the SLO at every rate, up to ${sig3(baselineSustained.ratePerSec)} prog/s${nearBatch}, so the ratios are bounds or unknown. To push the engines further: ${remedies.join(", ")}.`,
    );
  }

  const sweep: Record<string, SweepPoint[]> = {};
  for (const policy of policies) sweep[policy] = runs.sweepPoints(policy);

  return {
    format: "agentix-scheduling-bench/1",
    createdAt: deps.createdAt,
    config: {
      workload: workloadSource,
      workloadName: workload.name,
      programsPerRun: programs.length,
      engines: options.engines,
      engineProfile: options.engineProfile,
      maxInFlightPerEngine: options.maxInFlightPerEngine ?? POOL_DEFAULT_MAX_IN_FLIGHT,
      gapScale: options.gapScale,
      seed,
      policies: [...policies],
      rates: [...new Set(Object.values(sweep).flatMap((points) => points.map((p) => p.ratePerSec)))].sort((a, b) => a - b),
      ratesSource: adaptive ? "capacity-estimate" : "user",
      capacityEstimatePerSec,
      maxSimMs: options.maxSimMs,
      quick: options.quick,
      command: deps.command,
    },
    policies: policies.map((p) => ({ name: p, label: POLICIES[p].label, description: POLICIES[p].description })),
    baseline,
    slo,
    sweep,
    headline: policies.map((p) => {
      const s = sustained.get(p) as SustainedRate;
      return { policy: p, sustained: s, ratio: sustainedRatio(s, baselineSustained) };
    }),
    cdf: {
      ratePerSec: cdfRate,
      why: cdfWhy,
      series: policies.map((p) => ({ policy: p, quantiles: runs.output(p, cdfRate)?.cdf ?? [] })),
    },
    batch: policies.map((p) => batch.get(p) as BatchRun),
    notes,
    wallMs: deps.now() - started,
  };
}
