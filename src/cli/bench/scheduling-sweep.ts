import { POLICIES, type PolicyName, POOL_DEFAULT_MAX_IN_FLIGHT } from "../../sim/des/policies.js";
import type { SimulationResult } from "../../sim/des/simulate.js";
import type { BatchRun, BenchReport, CapacityEstimate, EqualLatencyLevel, GroupHeadline, PolicyHeadline, SweepPoint } from "../../sim/report/bench-report.js";
import { BENCH_REPORT_FORMAT } from "../../sim/report/bench-report.js";
import { percent, sig3 } from "../../sim/report/format.js";
import { evaluateGoals } from "../../sim/report/goals.js";
import { meetsSlo, type RatePoint, type SustainedRate, sustainedRate, sustainedRatio } from "../../sim/report/headline.js";
import { computeRunMetrics } from "../../sim/report/metrics.js";
import { DEFAULT_STABILITY, type GroupMetrics, type ProgramWindow } from "../../sim/report/steady-state.js";
import { DEFAULT_SEED, generatePrograms, type ProgramSpec, type Workload } from "../../sim/workload/index.js";
import type { Regime } from "./scheduling-regimes.js";
import { DEFAULTS, type SchedulingBenchOptions } from "./scheduling-options.js";
import type { BenchProgress } from "./scheduling-progress.js";
import { makeRunPlan, type RunOutput, type RunPlan, type RunSettings, type Simulate, withArrivals } from "./scheduling-run.js";
import { type ExecutorFactory, localExecutor, type RunExecutor } from "./scheduling-workers.js";

export type { Simulate } from "./scheduling-run.js";

/*
 * The benchmark proper: every policy on the same programs at a grid of Poisson
 * arrival rates, measured at steady state (src/sim/report/steady-state.ts), then the
 * headline (throughput at equal mean normalised latency), engagement, per-kind and
 * per-tenant results, and the regime's goals.
 *
 * The programs are generated once (Poisson at 1 program/s) and only their arrival
 * times are rescaled per rate (or zeroed for the batch). The generator's arrival
 * times scale exactly as 1/rate, so this is what it would give at each rate, and
 * every run sees the very same programs and the same warm-up / measured / cool-down
 * split. A run ends when every measured program has finished, or drainCap after the
 * window (then they are unfinished and the rate is not sustained).
 *
 * Rates: --rates, else the regime's grid, else a ladder around a capacity estimate
 * from steady-state busy time: the baseline's batch run gives a first guess C0 (it
 * only places the pilot), the baseline runs at steady state at C0 / 2 (the pilot),
 * and the pilot's programs finished in its window ÷ the engines' busy share there is
 * the estimate C. The ladder is C × {1/4, 1/2, 3/4, 1, 1.25, 1.5, 2} and adapts:
 * - a policy that still meets the SLO at its top rate gets the rate doubled, a few
 *   times at most;
 * - the interval where a policy crosses the SLO gets its geometric midpoint;
 * - a policy unstable at two rates in a row runs no higher rate (it would only be
 *   more unstable, and an overloaded run is the slowest to simulate).
 * Every policy runs every rate of the baseline's ladder (up to its own stop), so the
 * curves compare.
 */

export interface SweepDeps {
  /** Runs the batch runs, and the steady-state runs unless `executor` is given. */
  simulate: Simulate;
  /** Where the steady-state runs execute (default: this thread, with `simulate`). */
  executor?: ExecutorFactory;
  progress: BenchProgress;
  /** Wall clock in ms (performance.now()); only for the report's wall time. */
  now: () => number;
  /** ISO time the report is stamped with. */
  createdAt: string;
  /** Command line shown in the report. */
  command: string;
}

const FULL_LADDER = [1 / 4, 1 / 2, 3 / 4, 1, 1.25, 1.5, 2];
const QUICK_LADDER = [1 / 4, 3 / 4, 1.5];
/** Doublings above the ladder for a policy that still meets the SLO at its top. */
const MAX_EXTENSIONS = 3;
/** A crossing interval wider than this ratio gets its midpoint run (full mode). */
const REFINE_ABOVE_RATIO = 1.3;
/** Consecutive unstable rates after which a policy runs no higher rate. */
const STOP_AFTER_UNSTABLE = 2;
/** Latency levels (× the baseline's mean at the lowest rate) for throughput at equal latency. */
const EQUAL_LATENCY_FACTORS = [2, 3, 5];
/** The first run of the baseline (its lowest rate) may drain this many windows: nothing is known yet. */
const FIRST_RUN_DRAIN_WINDOWS = 4;
/** Later runs drain at least this many times the longest completion seen at the baseline's lowest rate. */
const DRAIN_LONGEST_FACTOR = 2;

/** Rounded to 3 significant digits so rates read well in tables. */
export function roundRate(rate: number): number {
  return Number(rate.toPrecision(3));
}

export function ladderAround(capacityPerSec: number, quick: boolean): number[] {
  return [...new Set((quick ? QUICK_LADDER : FULL_LADDER).map((f) => roundRate(capacityPerSec * f)))].filter((r) => r > 0).sort((a, b) => a - b);
}

/**
 * A first guess of capacity from the baseline's batch run: finished programs ÷ busy
 * time per engine. It counts the batch's tail, where a few long programs keep the
 * engines stepping with small batches, so it only places the steady-state pilot.
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

/** --programs, else the regime's, else the workload's own count capped at the default size. */
export function programsPerRun(options: Pick<SchedulingBenchOptions, "programs" | "quick">, workload: Workload): number {
  if (options.programs !== undefined) return options.programs;
  const cap = options.quick ? DEFAULTS.quickPrograms : DEFAULTS.programs;
  return Math.min(cap, workload.programs.count ?? cap);
}

/**
 * The pool's plan weights per tenant: the workload's explicit `planWeight`s. A
 * tenant's traffic share (`weight`) is not a plan weight: tenants without one weigh 1.
 */
export function planWeights(workload: Workload): Record<string, number> {
  return Object.fromEntries((workload.tenants ?? []).flatMap((t) => (t.planWeight === undefined ? [] : [[t.id, t.planWeight] as const])));
}

/** Tenants whose client opens a new program for every call. */
export function churningTenants(workload: Workload): string[] {
  return (workload.tenants ?? []).filter((t) => t.churnsPrograms).map((t) => t.id);
}

function runSummary(point: SweepPoint): string {
  const m = point.metrics;
  const mean = m.overall.meanMsPerToken;
  const stability = m.stability.stable ? "stable" : "UNSTABLE";
  return `${m.overall.finished}/${m.overall.programs} measured finished, mean ${m.overall.meanIsLowerBound ? "≥" : ""}${sig3(mean)} ms/tok, ${stability}, held ${percent(m.engagement.heldShare)}, ${sig3(m.simEndMs / 1_000)} s simulated, ${sig3(m.wallMs / 1_000)} s wall`;
}

const ratePoint = (p: SweepPoint): RatePoint => ({ ratePerSec: p.ratePerSec, meanMsPerToken: p.metrics.overall.meanMsPerToken, stable: p.metrics.stability.stable });

/** Runs one simulation per (policy, rate) and keeps what the report needs. */
class Runs {
  private readonly done = new Map<PolicyName, Map<number, RunOutput>>();
  private readonly running = new Map<string, Promise<void>>();
  /** ms after the window a run may drain; unknown until the baseline's lowest rate ran. */
  private minDrainMs: number | null = null;

  constructor(
    private readonly plan: RunPlan,
    private readonly executor: RunExecutor,
    private readonly options: Pick<SchedulingBenchOptions, "drainWindows">,
    private readonly deps: SweepDeps,
  ) {}

  get window(): ProgramWindow {
    return this.plan.window;
  }

  /** Median unloaded duration of the measured programs (ms). */
  get medianUnloadedMs(): number {
    const sorted = this.plan.window.measuredIds.map((id) => this.plan.unloaded.get(id) ?? 0).sort((a, b) => a - b);
    return Math.max(1, sorted[sorted.length >> 1] ?? 1);
  }

  /** The batch run (everything at t = 0): whole-run metrics, no steady state. */
  batch(policy: PolicyName): { result: SimulationResult; run: BatchRun } {
    const label = `${policy} batch`;
    this.deps.progress.startRun(label, this.plan.programs.length);
    const result = this.deps.simulate({ ...this.plan.settings, programs: withArrivals(this.plan.programs, () => 0), policy, onProgress: (p) => this.deps.progress.update(p) });
    const metrics = computeRunMetrics(result, { workTokens: this.plan.work });
    this.deps.progress.endRun(`${metrics.finished}/${metrics.programs} finished, ${sig3(metrics.simEndMs / 1_000)} s simulated`, label);
    const makespanMs = (metrics.unfinished === 0 ? metrics.completionMs?.max : undefined) ?? null;
    return { result, run: { policy, makespanMs, metrics } };
  }

  /** One steady-state run, not stored (the pilot). */
  async probe(policy: PolicyName, rate: number): Promise<SweepPoint> {
    return (await this.execute(policy, rate, `${policy} pilot @ ${sig3(rate)} prog/s`)).point;
  }

  /** Runs the rate unless it already ran (or is running). */
  ensure(policy: PolicyName, rate: number): Promise<void> {
    const key = `${policy}@${rate}`;
    const existing = this.running.get(key);
    if (existing !== undefined) return existing;
    const task = this.execute(policy, rate, `${policy} @ ${sig3(rate)} prog/s`).then((output) => {
      const runs = this.done.get(policy) ?? new Map<number, RunOutput>();
      this.done.set(policy, runs);
      runs.set(rate, output);
    });
    this.running.set(key, task);
    return task;
  }

  has(policy: PolicyName, rate: number): boolean {
    return this.running.has(`${policy}@${rate}`);
  }

  /** The finished runs, by ascending rate. */
  points(policy: PolicyName): SweepPoint[] {
    return [...(this.done.get(policy) ?? new Map<number, RunOutput>()).entries()].sort(([a], [b]) => a - b).map(([, out]) => out.point);
  }

  output(policy: PolicyName, rate: number): RunOutput | undefined {
    return this.done.get(policy)?.get(rate);
  }

  /** After the baseline's lowest rate: later runs drain at least twice its longest measured completion. */
  learnDrain(point: SweepPoint): void {
    const longest = point.metrics.overall.completionMs?.max;
    if (this.minDrainMs === null && longest !== undefined) this.minDrainMs = DRAIN_LONGEST_FACTOR * longest;
  }

  get minDrain(): number | null {
    return this.minDrainMs;
  }

  private execute(policy: PolicyName, rate: number, label: string): Promise<RunOutput> {
    const windowMs = (this.plan.window.endMs - this.plan.window.startMs) / rate;
    const drainCapMs = this.minDrainMs === null ? FIRST_RUN_DRAIN_WINDOWS * windowMs : Math.max(this.options.drainWindows * windowMs, this.minDrainMs);
    return this.executor.run({ policy, rate, drainCapMs }, label, (output) => runSummary(output.point));
  }
}

/** The highest ladder rate that met the SLO, walking up to the first miss. */
function topRate(points: readonly RatePoint[], slo: number): number | null {
  let top: number | null = null;
  for (const p of [...points].sort((a, b) => a.ratePerSec - b.ratePerSec)) {
    if (!meetsSlo(p, slo)) break;
    top = p.ratePerSec;
  }
  return top;
}

/** Two unstable rates in a row at the top of what a policy ran. */
function stoppedClimbing(points: readonly SweepPoint[]): boolean {
  const tail = points.slice(-STOP_AFTER_UNSTABLE);
  return tail.length === STOP_AFTER_UNSTABLE && tail.every((p) => !p.metrics.stability.stable);
}

function groupPoints(points: readonly SweepPoint[], pick: (p: SweepPoint) => GroupMetrics | undefined): RatePoint[] {
  return points.map((p) => ({ ratePerSec: p.ratePerSec, meanMsPerToken: pick(p)?.meanMsPerToken ?? null, stable: p.metrics.stability.stable }));
}

export interface SweepSetup {
  /** The regime being run, if any (its goals and paper comparison). */
  regime?: Regime;
}

export async function runSchedulingSweep(options: SchedulingBenchOptions, workloadSource: string, workload: Workload, deps: SweepDeps, setup: SweepSetup = {}): Promise<BenchReport> {
  const started = deps.now();
  const seed = options.seed ?? workload.seed ?? DEFAULT_SEED;
  const policies = options.policies;
  const baseline: PolicyName = policies.includes("fcfs-rr") ? "fcfs-rr" : (policies[0] as PolicyName);
  const references = [baseline, ...(policies.includes("fcfs-least-loaded") && baseline !== "fcfs-least-loaded" ? ["fcfs-least-loaded" as const] : [])];
  // The baseline runs first everywhere: the ladder and the SLO come from it.
  const order: PolicyName[] = [baseline, ...policies.filter((p) => p !== baseline)];

  const unitRate: Workload = { ...workload, arrival: { process: "poisson", ratePerSec: 1 } };
  const programs = scaleGaps(generatePrograms(unitRate, { seed, count: programsPerRun(options, workload) }), options.gapScale);
  const weights = planWeights(workload);
  const churning = churningTenants(workload);
  const settings: RunSettings = {
    engines: options.engines,
    engineProfile: options.engineProfile,
    tenantWeights: weights,
    ...(churning.length === 0 ? {} : { churnTenants: churning }),
    ...(options.maxInFlightPerEngine === undefined ? {} : { maxInFlightPerEngine: options.maxInFlightPerEngine }),
    ...(options.stepTargetFactor === undefined ? {} : { stepTargetFactor: options.stepTargetFactor }),
    ...(options.service === undefined ? {} : { service: options.service }),
  };
  const plan = makeRunPlan(programs, settings, { warmupFraction: options.warmupFraction, cooldownFraction: options.cooldownFraction });
  const executor = (deps.executor ?? localExecutor(deps.simulate))(plan, deps.progress);
  try {
    return await sweepWith(new Runs(plan, executor, options, deps), programs.length);
  } finally {
    await executor.close();
  }

  async function sweepWith(runs: Runs, programCount: number): Promise<BenchReport> {
  const notes: string[] = [];
  const ladderFactors = options.quick ? QUICK_LADDER : FULL_LADDER;
  const adaptive = options.rates === undefined;

  // Offline batch (--batch): everything at t = 0, every policy. The adaptive ladder
  // needs the baseline's anyway, for its first guess of capacity.
  const batch: BatchRun[] = [];
  let firstGuess: number | null = null;
  if (options.batch || adaptive) {
    for (const policy of options.batch ? order : [baseline]) {
      deps.progress.addRuns(1);
      const { result, run } = runs.batch(policy);
      if (options.batch) batch.push(run);
      if (policy === baseline && adaptive) firstGuess = batchCapacity(result);
    }
  }

  let ladder: number[];
  let ratesSource: BenchReport["config"]["ratesSource"];
  let pilotCapacity: CapacityEstimate | null = null;
  if (options.rates !== undefined) {
    ladder = options.rates;
    ratesSource = setup.regime !== undefined && options.ratesFromRegime ? "regime" : "user";
  } else {
    if (firstGuess === null) throw new Error("unreachable: no first guess of capacity");
    deps.progress.addRuns(1);
    // Half the first guess, but slow enough that the window lasts 4 median programs
    // (a faster pilot would be a burst, not a steady state).
    const burstFree = (runs.window.measured * 1_000) / (4 * runs.medianUnloadedMs);
    const pilotRate = roundRate(Math.min(firstGuess / 2, burstFree));
    const pilot = await runs.probe(baseline, pilotRate);
    const perSec = pilot.metrics.capacityPerSec;
    const why = `${baseline} at ${sig3(pilotRate)} prog/s (${pilotRate < roundRate(firstGuess / 2) ? "slow enough for a window of 4 median programs" : "half"} of the batch run's first guess, ${sig3(firstGuess)})`;
    pilotCapacity =
      perSec !== null && perSec > 0
        ? { perSec, source: `${why}: ${sig3(pilot.metrics.completionsPerSec)} programs finished per second in the window ÷ ${percent(pilot.metrics.engagement.busyShare)} mean engine busy share` }
        : { perSec: firstGuess, source: `the batch run's first guess: the pilot, ${why}, finished nothing in its window` };
    ladder = ladderAround(pilotCapacity.perSec, options.quick);
    ratesSource = "capacity-estimate";
  }
  deps.progress.addRuns(policies.length * ladder.length);

  // The baseline's lowest rate first: it sets how long later runs may drain.
  const lowest = ladder[0] as number;
  await runs.ensure(baseline, lowest);
  const lowestPoint = runs.output(baseline, lowest)?.point as SweepPoint;
  runs.learnDrain(lowestPoint);
  const lowestMean = lowestPoint.metrics.overall.meanMsPerToken;
  if (lowestMean === null) throw new Error("cannot derive the SLO: the baseline finished no measured program at the lowest rate (give --slo-ms-per-token)");
  const slo: BenchReport["slo"] =
    options.sloMsPerToken !== undefined
      ? { msPerToken: options.sloMsPerToken, source: "user", explanation: "given with --slo-ms-per-token" }
      : { msPerToken: lowestMean * options.sloFactor, source: "default", explanation: `${sig3(options.sloFactor)}× ${baseline}'s mean at the lowest rate, ${sig3(lowest)} prog/s` };

  const skipped = new Map<PolicyName, number[]>();
  const runLadder = async (policy: PolicyName, rates: readonly number[]): Promise<void> => {
    for (const rate of rates) {
      if (runs.has(policy, rate)) continue;
      if (stoppedClimbing(runs.points(policy)) && rate > (runs.points(policy).at(-1)?.ratePerSec ?? 0)) {
        skipped.set(policy, [...(skipped.get(policy) ?? []), rate]);
        deps.progress.addRuns(-1);
        continue;
      }
      await runs.ensure(policy, rate);
    }
  };
  const extend = async (policy: PolicyName): Promise<void> => {
    for (let i = 0; i < MAX_EXTENSIONS; i++) {
      const points = runs.points(policy).map(ratePoint);
      if (sustainedRate(points, slo.msPerToken).relation !== ">=") return;
      const next = roundRate((points[points.length - 1] as RatePoint).ratePerSec * 2);
      deps.progress.addRuns(1);
      await runs.ensure(policy, next);
      if (policy === baseline) {
        ladder = [...ladder, next];
        deps.progress.addRuns(order.length - 1);
      }
    }
  };
  const refine = async (policy: PolicyName): Promise<void> => {
    const points = runs.points(policy).map(ratePoint);
    const missIndex = points.findIndex((p) => !meetsSlo(p, slo.msPerToken));
    if (missIndex <= 0) return;
    const low = (points[missIndex - 1] as RatePoint).ratePerSec;
    const high = (points[missIndex] as RatePoint).ratePerSec;
    if (high / low <= REFINE_ABOVE_RATIO) return;
    const mid = roundRate(Math.sqrt(low * high));
    if (runs.has(policy, mid)) return;
    deps.progress.addRuns(1);
    await runs.ensure(policy, mid);
  };
  const runPolicy = async (policy: PolicyName): Promise<void> => {
    await runLadder(policy, ladder);
    if (!adaptive) return;
    await extend(policy);
    if (!options.quick) await refine(policy);
  };

  // The baseline first (its ladder may grow), then the others side by side: with
  // --jobs N their runs share N workers; each decides its next rate from its last.
  await runPolicy(baseline);
  await Promise.all(order.slice(1).map(runPolicy));
  const stopped = order.flatMap((policy) => {
    const rates = skipped.get(policy);
    return rates === undefined ? [] : [`${policy} (${rates.map(sig3).join(", ")})`];
  });
  if (stopped.length > 0) notes.push(`Unstable at ${STOP_AFTER_UNSTABLE} rates in a row, so not run at the higher rates (prog/s): ${stopped.join("; ")}.`);

  // Per-load columns compare policies at the highest rate the baseline sustains: it is
  // still acceptable there, and differences between policies start to matter.
  const baselineRatePoints = runs.points(baseline).map(ratePoint);
  const baselineTop = topRate(baselineRatePoints, slo.msPerToken);
  const compareRate = baselineTop ?? lowest;
  const compareWhy = baselineTop !== null ? `the highest rate at which ${baseline} meets the SLO` : `the lowest rate: ${baseline} misses the SLO at every rate`;
  const missing = order.filter((policy) => !runs.has(policy, compareRate));
  deps.progress.addRuns(missing.length);
  await Promise.all(missing.map((policy) => runs.ensure(policy, compareRate)));

  const sustained = new Map<PolicyName, SustainedRate>(order.map((p) => [p, sustainedRate(runs.points(p).map(ratePoint), slo.msPerToken)]));
  const ratiosOf = (s: SustainedRate, at: (reference: PolicyName) => SustainedRate): Record<string, ReturnType<typeof sustainedRatio>> =>
    Object.fromEntries(references.map((reference) => [reference, sustainedRatio(s, at(reference))]));
  const headline: PolicyHeadline[] = policies.map((p) => {
    const s = sustained.get(p) as SustainedRate;
    return { policy: p, sustained: s, topRatePerSec: topRate(runs.points(p).map(ratePoint), slo.msPerToken), ratios: ratiosOf(s, (r) => sustained.get(r) as SustainedRate) };
  });

  const baselineSustained = sustained.get(baseline) as SustainedRate;
  if (baselineSustained.relation === ">=") {
    const remedies = ["raise --rates", "lower --engines", ...(options.gapScale > 0 ? ["scale tool time down (--gap-scale 0 is Autellix's stress setting)"] : []), "or tighten the SLO"];
    notes.push(`${baseline} met the SLO at every rate, up to ${sig3(baselineSustained.ratePerSec)} prog/s, so the ratios are bounds or unknown. To push the engines further: ${remedies.join(", ")}.`);
  }
  for (const policy of order) {
    const unstableUnder = runs.points(policy).filter((p) => !p.metrics.stability.stable && p.metrics.overall.meanMsPerToken !== null && p.metrics.overall.meanMsPerToken <= slo.msPerToken);
    if (unstableUnder.length > 0) {
      notes.push(`${policy}: mean under the SLO but not stable at ${unstableUnder.map((p) => sig3(p.ratePerSec)).join(", ")} prog/s (${unstableUnder[0]?.metrics.stability.reasons.join("; ")}): not counted as sustained.`);
    }
  }

  // Throughput at equal latency, at a few latency levels.
  const factors = [...new Set([...EQUAL_LATENCY_FACTORS, ...(options.sloMsPerToken === undefined ? [options.sloFactor] : [])])].sort((a, b) => a - b);
  const equalLatency: EqualLatencyLevel[] = factors.map((factor) => {
    const ms = lowestMean * factor;
    const at = new Map(order.map((p) => [p, sustainedRate(runs.points(p).map(ratePoint), ms)]));
    return {
      factor,
      msPerToken: ms,
      perPolicy: policies.map((p) => ({ policy: p, sustained: at.get(p) as SustainedRate, ratios: ratiosOf(at.get(p) as SustainedRate, (r) => at.get(r) as SustainedRate) })),
    };
  });

  // Per kind and per tenant: each group's own SLO (the same factor on the baseline's
  // group mean at the lowest rate), the run's stability.
  const groupHeadlines = (keysOf: (p: SweepPoint) => Record<string, GroupMetrics>): GroupHeadline[] => {
    const groups = [...new Set(order.flatMap((p) => runs.points(p).flatMap((pt) => Object.keys(keysOf(pt)))))].sort();
    return groups.map((group) => {
      const baseMean = keysOf(lowestPoint)[group]?.meanMsPerToken ?? null;
      const groupSlo = baseMean === null ? null : options.sloMsPerToken === undefined ? baseMean * options.sloFactor : (slo.msPerToken * baseMean) / lowestMean;
      const perGroup = new Map(
        order.map((p) => {
          const pts = groupPoints(runs.points(p), (pt) => keysOf(pt)[group]);
          return [p, groupSlo === null || pts.length === 0 ? null : sustainedRate(pts, groupSlo)] as const;
        }),
      );
      const base = perGroup.get(baseline) ?? null;
      return {
        group,
        sloMsPerToken: groupSlo,
        perPolicy: policies.map((p) => {
          const s = perGroup.get(p) ?? null;
          return { policy: p, sustained: s, ratio: s === null || base === null ? null : sustainedRatio(s, base) };
        }),
      };
    });
  };

  // Capacity from steady-state busy time: the baseline's most loaded stable run.
  const stableBaseline = runs.points(baseline).filter((p) => p.metrics.stability.stable && p.metrics.capacityPerSec !== null);
  const capacityPoint = stableBaseline.at(-1);
  const capacity: CapacityEstimate | null =
    capacityPoint === undefined
      ? pilotCapacity
      : {
          perSec: capacityPoint.metrics.capacityPerSec as number,
          source: `${baseline} at ${sig3(capacityPoint.ratePerSec)} prog/s, its most loaded stable run: ${sig3(capacityPoint.metrics.completionsPerSec)} programs finished per second in the window ÷ ${percent(capacityPoint.metrics.engagement.busyShare)} mean engine busy share${pilotCapacity === null ? "" : `; the ladder was placed by the pilot's ${sig3(pilotCapacity.perSec)} (${pilotCapacity.source})`}`,
        };

  const sweep: Record<string, SweepPoint[]> = {};
  for (const policy of policies) sweep[policy] = runs.points(policy);
  const unit = runs.window;

  const report: BenchReport = {
    format: BENCH_REPORT_FORMAT,
    createdAt: deps.createdAt,
    config: {
      regime: setup.regime?.name ?? null,
      workload: workloadSource,
      workloadName: workload.name,
      programsPerRun: programCount,
      window: { warmupFraction: options.warmupFraction, cooldownFraction: options.cooldownFraction },
      stability: { ...DEFAULT_STABILITY },
      drain: { windows: options.drainWindows, minMs: runs.minDrain },
      engines: options.engines,
      engineProfile: options.engineProfile,
      maxInFlightPerEngine: options.maxInFlightPerEngine ?? POOL_DEFAULT_MAX_IN_FLIGHT,
      gapScale: options.gapScale,
      seed,
      planWeights: weights,
      policies: [...policies],
      rates: [...new Set(Object.values(sweep).flatMap((points) => points.map((p) => p.ratePerSec)))].sort((a, b) => a - b),
      ratesSource,
      capacity,
      quick: options.quick,
      command: deps.command,
    },
    policies: policies.map((p) => ({ name: p, label: POLICIES[p].label, description: POLICIES[p].description })),
    baseline,
    references,
    slo,
    sweep,
    headline,
    equalLatency,
    byKind: groupHeadlines((p) => p.metrics.byKind),
    byTenant: groupHeadlines((p) => p.metrics.byTenant),
    compareAt: { ratePerSec: compareRate, why: compareWhy },
    cdf: { ratePerSec: compareRate, series: policies.map((p) => ({ policy: p, quantiles: runs.output(p, compareRate)?.cdf ?? [] })) },
    batch,
    goals: [],
    paper: null,
    notes: [
      `window: of ${programCount} programs, the first ${unit.warmup} warm up and the last ${unit.cooldown} keep the load on; the ${unit.measured} between are measured.`,
      ...notes,
    ],
    wallMs: 0,
  };
  const regime = setup.regime;
  if (regime !== undefined) {
    report.goals = evaluateGoals(report, regime.goals);
    if (regime.paper !== undefined) report.paper = { paper: regime.paper.paper, ours: regime.paper.ours(report), explanation: regime.paper.explanation(report) };
  }
  report.wallMs = deps.now() - started;
  return report;
  }
}
