import type { PolicyName } from "../../sim/des/policies.js";
import { unloadedDurationMs } from "../../sim/des/remaining-work.js";
import type { SimulationConfig, SimulationResult } from "../../sim/des/simulate.js";
import type { SweepPoint } from "../../sim/report/bench-report.js";
import { quantilePoints } from "../../sim/report/distribution.js";
import { normalizedLatencies } from "../../sim/report/metrics.js";
import { computeSteadyState, type ProgramWindow, programWindow, type WindowSpec } from "../../sim/report/steady-state.js";
import { resolveProfile } from "../../sim/profiles.js";
import { type ProgramSpec, promptTokenCount } from "../../sim/workload/index.js";

/*
 * One steady-state run of the scheduling benchmark, the same in the main thread and
 * in a worker (scheduling-workers.ts): the programs at unit rate are rescaled to the
 * rate, simulated with the measurement window, and reduced to the run's figures.
 */

export type Simulate = (config: SimulationConfig) => SimulationResult;

/** The simulator's settings shared by every run (structured-cloneable: workers get a copy). */
export type RunSettings = Omit<SimulationConfig, "programs" | "policy" | "onProgress">;

/** Everything a run needs besides the policy and the rate. */
export interface RunPlan {
  /** At 1 program/s; a run divides the arrival times by its rate. */
  programs: readonly ProgramSpec[];
  settings: RunSettings;
  window: ProgramWindow;
  planned: ReadonlyMap<string, number>;
  work: ReadonlyMap<string, number>;
  unloaded: ReadonlyMap<string, number>;
}

/** What the main thread keeps of a run. */
export interface RunOutput {
  point: SweepPoint;
  /** Quantiles of the measured programs' normalised latency. */
  cdf: { q: number; value: number }[];
}

/** Samples of the pool's state across the window (the stability test's resolution). */
const SAMPLES_PER_WINDOW = 120;
const CDF_POINTS = 101;

export function makeRunPlan(programs: readonly ProgramSpec[], settings: RunSettings, windowSpec: WindowSpec): RunPlan {
  const profile = resolveProfile(settings.engineProfile);
  return {
    programs,
    settings,
    window: programWindow(programs, windowSpec),
    planned: new Map(programs.map((p) => [p.programId, p.calls.reduce((sum, c) => sum + c.outputTokens, 0)])),
    work: new Map(programs.map((p) => [p.programId, p.calls.reduce((sum, c) => sum + promptTokenCount(c) + c.outputTokens, 0)])),
    unloaded: new Map(programs.map((p) => [p.programId, unloadedDurationMs(profile, p)])),
  };
}

export function withArrivals(programs: readonly ProgramSpec[], arrivalMs: (p: ProgramSpec) => number): ProgramSpec[] {
  return programs.map((p) => ({ ...p, arrivalMs: arrivalMs(p) }));
}

/** The plan's window at a rate. */
export function windowAt(plan: RunPlan, rate: number): ProgramWindow {
  return { ...plan.window, startMs: plan.window.startMs / rate, endMs: plan.window.endMs / rate };
}

/** One steady-state run: `drainCapMs` is how long past the window it may go on. */
export function runSteadyState(
  plan: RunPlan,
  simulate: Simulate,
  policy: PolicyName,
  rate: number,
  drainCapMs: number,
  onProgress?: SimulationConfig["onProgress"],
): RunOutput {
  const programs = withArrivals(plan.programs, (p) => p.arrivalMs / rate);
  const window = windowAt(plan, rate);
  const windowMs = window.endMs - window.startMs;
  const result = simulate({
    ...plan.settings,
    programs,
    policy,
    recordCalls: true,
    window: { startMs: window.startMs, endMs: window.endMs },
    sampleEveryMs: windowMs / SAMPLES_PER_WINDOW,
    endWhenFinished: window.measuredIds,
    maxSimMs: window.endMs + drainCapMs,
    ...(onProgress === undefined ? {} : { onProgress }),
  });
  const metrics = computeSteadyState(result, { window, plannedOutputTokens: plan.planned, workTokens: plan.work, unloadedDurationMs: plan.unloaded });
  const measured = new Set(window.measuredIds);
  const latencies = normalizedLatencies({ ...result, programs: result.programs.filter((p) => measured.has(p.programId)) });
  return { point: { ratePerSec: rate, metrics, samples: result.samples ?? [] }, cdf: quantilePoints(latencies, CDF_POINTS) };
}
