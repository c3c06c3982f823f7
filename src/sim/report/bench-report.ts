import type { Ratio, SustainedRate } from "./headline.js";
import type { RunMetrics } from "./metrics.js";

/*
 * Everything one `agentix bench` run found: the JSON file it writes, and the input of
 * the text table and the HTML report. Plain data (JSON.stringify-able; NaN never
 * appears, absent figures are null).
 */

export interface BenchPolicy {
  name: string;
  label: string;
  description: string;
}

export interface BenchConfig {
  /** What --workload named (a built-in name or a path). */
  workload: string;
  workloadName: string;
  programsPerRun: number;
  engines: number;
  engineProfile: string;
  /** The pool's per-engine buffer for the queueing policies (the direct ones ignore it). */
  maxInFlightPerEngine: number;
  /** Factor on every tool / think gap of the workload (1: as generated; 0: none). */
  gapScale: number;
  seed: number;
  policies: string[];
  /** Every rate that ran (the adaptive ladder's included), ascending. */
  rates: number[];
  ratesSource: "user" | "capacity-estimate";
  /** Programs/s the engines could sustain: the baseline batch's finished programs ÷ busy time per engine. */
  capacityEstimatePerSec: number | null;
  maxSimMs: number;
  quick: boolean;
  command: string;
}

export interface Slo {
  msPerToken: number;
  source: "user" | "default";
  /** How a default was derived, for people reading the report. */
  explanation: string;
}

export interface SweepPoint {
  ratePerSec: number;
  metrics: RunMetrics;
}

export interface PolicyHeadline {
  policy: string;
  sustained: SustainedRate;
  /** Against the baseline; null when the bounds say nothing. */
  ratio: Ratio | null;
}

export interface CdfSeries {
  policy: string;
  /** Evenly spaced quantiles of the per-program normalised latency (ms per token). */
  quantiles: { q: number; value: number }[];
}

export interface BatchRun {
  policy: string;
  /** Last finish − 0 (all programs arrive at t = 0); null when some never finished. */
  makespanMs: number | null;
  metrics: RunMetrics;
}

export interface BenchReport {
  format: "agentix-scheduling-bench/1";
  createdAt: string;
  config: BenchConfig;
  policies: BenchPolicy[];
  baseline: string;
  slo: Slo;
  /** Per policy, its runs in ascending rate. */
  sweep: Record<string, SweepPoint[]>;
  headline: PolicyHeadline[];
  cdf: { ratePerSec: number; why: string; series: CdfSeries[] };
  batch: BatchRun[];
  /** Caveats found while running (e.g. the baseline never missed the SLO). */
  notes: string[];
  wallMs: number;
}
