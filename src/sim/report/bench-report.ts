import type { RunSample } from "../des/observer.js";
import type { GoalResult } from "./goals.js";
import type { Ratio, SustainedRate } from "./headline.js";
import type { RunMetrics } from "./metrics.js";
import type { SteadyStateMetrics, StabilitySettings, WindowSpec } from "./steady-state.js";

/*
 * Everything one `agentix bench` run found: the JSON file it writes, and the input of
 * the text tables and the HTML report. Plain data (JSON.stringify-able; NaN never
 * appears, absent figures are null).
 */

export const BENCH_REPORT_FORMAT = "agentix-scheduling-bench/2";

export interface BenchPolicy {
  name: string;
  label: string;
  description: string;
}

export interface CapacityEstimate {
  /** Programs/s the engines would complete if never idle, at the batching of the run it comes from. */
  perSec: number;
  /** How it was measured, in words. */
  source: string;
}

export interface BenchConfig {
  /** `--regime` when one was given. */
  regime: string | null;
  /** What --workload named (a built-in name or a path). */
  workload: string;
  workloadName: string;
  /** Programs per run: warm-up + measured + cool-down. */
  programsPerRun: number;
  window: WindowSpec;
  stability: StabilitySettings;
  /**
   * How long after its window a run may go on for its measured programs to finish:
   * max(windows × the window's length, minMs); minMs is twice the longest measured
   * completion at the baseline's lowest rate (null before that run). Measured programs
   * still running then are unfinished, and the rate is not sustained.
   */
  drain: { windows: number; minMs: number | null };
  engines: number;
  engineProfile: string;
  /** The pool's per-engine buffer for the queueing policies (the direct ones ignore it). */
  maxInFlightPerEngine: number;
  /** Factor on every tool / think gap of the workload (1: as generated; 0: none). */
  gapScale: number;
  seed: number;
  /** Plan weights the pool's tenant fair share used (the workload's planWeight; absent tenants weigh 1). */
  planWeights: Record<string, number>;
  policies: string[];
  /** Every rate that ran, ascending. */
  rates: number[];
  ratesSource: "user" | "regime" | "capacity-estimate";
  /** From steady-state busy time (steady-state.ts), not from a batch run. */
  capacity: CapacityEstimate | null;
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
  metrics: SteadyStateMetrics;
  /** The pool's state over the run (programs in system, calls held, …), for plots and checks. */
  samples: RunSample[];
}

export interface PolicyHeadline {
  policy: string;
  sustained: SustainedRate;
  /** The highest ladder rate that met the SLO (stable, mean ≤ SLO); null when none did. */
  topRatePerSec: number | null;
  /** Against each reference policy present (the baseline, fcfs-least-loaded); null when the bounds say nothing. */
  ratios: Record<string, Ratio | null>;
}

export interface EqualLatencyLevel {
  /** × the baseline's mean at the lowest rate. */
  factor: number;
  msPerToken: number;
  perPolicy: { policy: string; sustained: SustainedRate; ratios: Record<string, Ratio | null> }[];
}

/** Sustained rates judged on one group (a program kind, a tenant): its own SLO, the run's stability. */
export interface GroupHeadline {
  group: string;
  /** factor × the baseline's group mean at the lowest rate. */
  sloMsPerToken: number | null;
  perPolicy: { policy: string; sustained: SustainedRate | null; ratio: Ratio | null }[];
}

export interface CdfSeries {
  policy: string;
  /** Evenly spaced quantiles of the measured programs' normalised latency (ms per token). */
  quantiles: { q: number; value: number }[];
}

export interface BatchRun {
  policy: string;
  /** Last finish − 0 (all programs arrive at t = 0); null when some never finished. */
  makespanMs: number | null;
  metrics: RunMetrics;
}

export interface PaperComparison {
  /** What the paper reports, e.g. "4–15× vLLM's throughput at equal latency". */
  paper: string;
  /** Our figures, e.g. "agentix 3.2× fcfs-rr". */
  ours: string;
  /** Why they differ. */
  explanation: string[];
}

export interface BenchReport {
  format: typeof BENCH_REPORT_FORMAT;
  createdAt: string;
  config: BenchConfig;
  policies: BenchPolicy[];
  baseline: string;
  /** The policies ratios are taken against (the baseline first). */
  references: string[];
  slo: Slo;
  /** Per policy, its runs in ascending rate. */
  sweep: Record<string, SweepPoint[]>;
  headline: PolicyHeadline[];
  /** Sustained rates at several latency levels: Autellix's "throughput at equal latency". */
  equalLatency: EqualLatencyLevel[];
  byKind: GroupHeadline[];
  byTenant: GroupHeadline[];
  /** The rate per-load columns compare policies at, and why. */
  compareAt: { ratePerSec: number; why: string };
  cdf: { ratePerSec: number; series: CdfSeries[] };
  /** Offline batch runs (--batch only). */
  batch: BatchRun[];
  goals: GoalResult[];
  paper: PaperComparison | null;
  /** Caveats found while running (e.g. the baseline never missed the SLO). */
  notes: string[];
  wallMs: number;
}
