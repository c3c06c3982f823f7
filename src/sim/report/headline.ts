/*
 * The headline: the highest arrival rate each policy sustains while its mean
 * normalised latency stays under an SLO, as a ratio to a baseline policy (FCFS),
 * which is how Autellix states its throughput gains (throughput at equal latency).
 *
 * "Sustains" is the first crossing: walking up the rate ladder, the last rate that
 * meets the SLO before the first one that misses it. A rate meets the SLO only when
 * the run is stable at steady state (steady-state.ts: backlog and latency not
 * growing, every measured program finished) and its mean is at most the SLO; an
 * unstable rate misses whatever its mean. Between the last rate met and a first
 * miss that is stable but over the SLO, the crossing is interpolated in log–log
 * space (latency grows about geometrically with load), so the ratio is not rounded
 * to the ladder's steps; when the first miss is unstable, the last rate met is the
 * figure (the system stops keeping up somewhere in between). When every rate meets
 * the SLO the figure is only a lower bound (">="); when even the lowest misses, an
 * upper bound ("<").
 */

export interface RatePoint {
  ratePerSec: number;
  /** Mean normalised latency (ms per token); null when no program finished. */
  meanMsPerToken: number | null;
  /** The run kept up at steady state (see steady-state.ts). */
  stable: boolean;
}

export type Relation = "=" | ">=" | "<=" | ">" | "<";

export interface SustainedRate {
  ratePerSec: number;
  /** "=": interpolated inside the ladder; ">=": every rate met the SLO; "<": none did. */
  relation: "=" | ">=" | "<";
}

export interface Ratio {
  value: number;
  relation: Relation;
}

/** The default SLO: this many times the baseline's mean normalised latency at the lowest rate. */
export const DEFAULT_SLO_FACTOR = 5;

/** A run meets the SLO when it is stable and its mean is at most the SLO. */
export function meetsSlo(point: RatePoint, sloMsPerToken: number): boolean {
  return point.stable && point.meanMsPerToken !== null && point.meanMsPerToken <= sloMsPerToken;
}

export function sustainedRate(points: readonly RatePoint[], sloMsPerToken: number): SustainedRate {
  const sorted = [...points].sort((a, b) => a.ratePerSec - b.ratePerSec);
  const first = sorted[0];
  if (first === undefined) throw new RangeError("sustainedRate needs at least one rate");
  const missIndex = sorted.findIndex((p) => !meetsSlo(p, sloMsPerToken));
  if (missIndex === -1) return { ratePerSec: (sorted[sorted.length - 1] as RatePoint).ratePerSec, relation: ">=" };
  if (missIndex === 0) return { ratePerSec: first.ratePerSec, relation: "<" };
  const met = sorted[missIndex - 1] as RatePoint;
  const missed = sorted[missIndex] as RatePoint;
  const metLatency = met.meanMsPerToken as number;
  if (!missed.stable || missed.meanMsPerToken === null || metLatency <= 0 || missed.meanMsPerToken <= metLatency) {
    // Nothing to interpolate on: the last rate that met the SLO.
    return { ratePerSec: met.ratePerSec, relation: "=" };
  }
  const t = (Math.log(sloMsPerToken) - Math.log(metLatency)) / (Math.log(missed.meanMsPerToken) - Math.log(metLatency));
  const logRate = Math.log(met.ratePerSec) + t * (Math.log(missed.ratePerSec) - Math.log(met.ratePerSec));
  return { ratePerSec: Math.exp(logRate), relation: "=" };
}

/** policy ÷ baseline, with the bound that the two rates' bounds allow; null when unknown. */
export function sustainedRatio(policy: SustainedRate, baseline: SustainedRate): Ratio | null {
  const value = policy.ratePerSec / baseline.ratePerSec;
  const key = `${policy.relation}|${baseline.relation}`;
  const relation: Record<string, Relation | null> = {
    "=|=": "=",
    ">=|=": ">=",
    "=|>=": "<=",
    "<|=": "<",
    "<|>=": "<",
    ">=|<": ">",
    "=|<": ">",
    ">=|>=": null,
    "<|<": null,
  };
  const r = relation[key];
  return r === undefined || r === null ? null : { value, relation: r };
}

/** Default SLO from the baseline's lowest-rate point. */
export function defaultSlo(baselinePoints: readonly RatePoint[], factor = DEFAULT_SLO_FACTOR): number {
  const lowest = [...baselinePoints].sort((a, b) => a.ratePerSec - b.ratePerSec)[0];
  if (lowest === undefined || lowest.meanMsPerToken === null) {
    throw new Error("cannot derive the SLO: the baseline finished no program at the lowest rate (give --slo-ms-per-token)");
  }
  return lowest.meanMsPerToken * factor;
}

export function formatRelation(relation: Relation, text: string): string {
  return relation === "=" ? text : `${relation === ">=" ? "≥" : relation === "<=" ? "≤" : relation}${text}`;
}
