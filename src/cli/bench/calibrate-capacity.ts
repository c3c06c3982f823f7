/*
 * Single-engine capacity for tree-search (LATS) programs: the highest Poisson rate
 * one engine sustains under a policy, found by the discrete-event simulator.
 *
 * One probe: programs of the workload arrive at `rate` for `windowMs`; the run may
 * drain for `drainMs` more. The rate is sustained when every program finished by
 * then and latency does not trend up: the mean normalised latency (response time /
 * generated tokens, Autellix's metric) of programs arriving in the last third of the
 * window is at most `growthLimit` times that of the first third. An overloaded
 * engine fails both (its backlog, and so every later program's latency, grows).
 *
 * Search: the rate doubles from `startRate` until a probe fails, then the interval
 * between the last sustained and the failed rate is bisected `bisections` times.
 */

import type { PolicyName } from "../../sim/des/policies.js";
import { type SimulationResult, simulate } from "../../sim/des/simulate.js";
import type { EngineProfileName } from "../../sim/profiles.js";
import { generatePrograms } from "../../sim/workload/generate.js";
import type { Workload } from "../../sim/workload/schema.js";

export interface CapacityOptions {
  policy: PolicyName;
  engineProfile: EngineProfileName;
  seed: number;
  windowMs: number;
  drainMs: number;
  startRate: number;
  bisections: number;
  growthLimit: number;
  maxInFlightPerEngine?: number;
  /** Called after each probe. */
  onProbe?: (probe: CapacityProbe) => void;
}

export const DEFAULT_CAPACITY_OPTIONS = {
  seed: 1,
  windowMs: 30 * 60_000,
  drainMs: 10 * 60_000,
  startRate: 0.025,
  bisections: 2,
  growthLimit: 1.25,
} as const;

export interface CapacityProbe {
  rate: number;
  programs: number;
  unfinished: number;
  /** Mean normalised latency (ms per generated token) of finished programs arriving in the first / last third of the window. */
  firstThirdMsPerToken: number;
  lastThirdMsPerToken: number;
  sustained: boolean;
  wallMs: number;
  simMs: number;
}

export interface CapacityResult {
  policy: PolicyName;
  maxInFlightPerEngine: number | undefined;
  /** Highest sustained rate probed (programs/s); 0 when none was. */
  sustainedRate: number;
  /** Lowest failed rate probed. */
  failedRate: number | undefined;
  probes: CapacityProbe[];
}

function meanMsPerToken(result: SimulationResult, fromMs: number, toMs: number): number {
  let sum = 0;
  let n = 0;
  for (const p of result.programs) {
    if (p.arrivalMs < fromMs || p.arrivalMs >= toMs || !Number.isFinite(p.finishMs) || p.generatedTokens === 0) continue;
    sum += (p.finishMs - p.arrivalMs) / p.generatedTokens;
    n += 1;
  }
  return n === 0 ? Number.NaN : sum / n;
}

export function probeRate(workload: Workload, rate: number, options: CapacityOptions): CapacityProbe {
  const arriving: Workload = { ...workload, arrival: { process: "poisson", ratePerSec: rate }, programs: { durationSec: options.windowMs / 1_000 } };
  const programs = generatePrograms(arriving, { seed: options.seed });
  const result = simulate({
    programs,
    policy: options.policy,
    engines: 1,
    engineProfile: options.engineProfile,
    maxSimMs: options.windowMs + options.drainMs,
    ...(options.maxInFlightPerEngine === undefined ? {} : { maxInFlightPerEngine: options.maxInFlightPerEngine }),
  });
  const third = options.windowMs / 3;
  const first = meanMsPerToken(result, 0, third);
  const last = meanMsPerToken(result, 2 * third, options.windowMs);
  const unfinished = result.programs.filter((p) => !Number.isFinite(p.finishMs)).length;
  return {
    rate,
    programs: programs.length,
    unfinished,
    firstThirdMsPerToken: first,
    lastThirdMsPerToken: last,
    sustained: unfinished === 0 && Number.isFinite(first) && Number.isFinite(last) && last <= options.growthLimit * first,
    wallMs: result.wallMs,
    simMs: result.simEndMs,
  };
}

export function findCapacity(workload: Workload, options: CapacityOptions): CapacityResult {
  const probes: CapacityProbe[] = [];
  const probe = (rate: number): boolean => {
    const p = probeRate(workload, rate, options);
    probes.push(p);
    options.onProbe?.(p);
    return p.sustained;
  };
  let low = 0;
  let high: number | undefined;
  for (let rate = options.startRate; high === undefined && rate <= 64; rate *= 2) {
    if (probe(rate)) low = rate;
    else high = rate;
  }
  if (high !== undefined) {
    let failed: number = high;
    for (let i = 0; i < options.bisections; i++) {
      const mid: number = (low + failed) / 2;
      if (probe(mid)) low = mid;
      else failed = mid;
    }
    high = failed;
  }
  return { policy: options.policy, maxInFlightPerEngine: options.maxInFlightPerEngine, sustainedRate: low, failedRate: high, probes };
}
