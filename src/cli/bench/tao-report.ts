/*
 * The placement benchmark's report: its JSON shape, the comparison of agentix-tao
 * with the others (where it loses, said plainly), and the text tables.
 */

import type { ReadinessErrorReport, ReadinessSource } from "../../core/tao/readiness.js";
import type { PolicyName } from "../../sim/des/policies.js";
import type { TaoRunStats } from "../../sim/des/tao-simulation.js";
import type { PlanTiming, RunMetrics } from "./tao-metrics.js";
import type { TaoBenchOptions, TaoBenchWorkload } from "./tao-options.js";

export interface TaoPlannerFigures extends Omit<TaoRunStats, "planner"> {
  planTime: PlanTiming;
  dpPlans: number;
  fallbacks: number;
  /** Fallbacks / plans. */
  fallbackRate: number;
  fallbacksAtBound: number;
  maxStateSpace: number;
}

export interface TaoBenchRun {
  workload: TaoBenchWorkload;
  ratePerSec: number;
  policy: PolicyName;
  /** agentix-tao only: the run's holdLeftOutMs (JSON writes Infinity as null). */
  holdMs?: number;
  metrics: RunMetrics;
  /** agentix-tao only. */
  tao?: TaoPlannerFigures;
}

/** The policy's name, with agentix-tao's hold when runs differ by it. */
export function policyLabel(run: Pick<TaoBenchRun, "policy" | "holdMs">, withHold: boolean): string {
  if (!withHold || run.holdMs === undefined) return run.policy;
  const hold = run.holdMs === Number.POSITIVE_INFINITY ? "inf" : `${run.holdMs / 1_000} s`;
  return `${run.policy} hold ${hold}`;
}

const holdsDiffer = (runs: readonly TaoBenchRun[]) => new Set(runs.filter((r) => r.holdMs !== undefined).map((r) => r.holdMs)).size > 1;

export interface TaoLoss {
  workload: TaoBenchWorkload;
  ratePerSec: number;
  metric: string;
  /** The agentix-tao run's holdLeftOutMs. */
  holdMs?: number;
  tao: number;
  best: number;
  bestPolicy: PolicyName;
  /** How much worse, relative to the best (0.1 = 10 %). */
  worseBy: number;
}

export interface TaoBenchReport {
  createdAt: string;
  command: string;
  /** The options the runs used (holdMs: JSON writes Infinity, hold until promoted, as null). */
  config: Omit<TaoBenchOptions, "programs" | "rates" | "outDir"> & {
    /** Of the workloads run only. */
    programs: Record<string, number>;
    rates: Record<string, number[]>;
    engineProfile: string;
  };
  runs: TaoBenchRun[];
  /** Every metric and load where agentix-tao is more than LOSS_MARGIN worse than the best other policy. */
  losses: TaoLoss[];
  wallMs: number;
}

/** Differences below this are noise in one seed's run, not findings. */
export const LOSS_MARGIN = 0.02;

interface Compared {
  name: string;
  value: (m: RunMetrics) => number;
  lowerIsBetter: boolean;
}

const COMPARED: Compared[] = [
  { name: "job latency mean", value: (m) => m.jobLatencyMs.mean, lowerIsBetter: true },
  { name: "job latency p99", value: (m) => m.jobLatencyMs.p99, lowerIsBetter: true },
  { name: "TTFT mean", value: (m) => m.ttftMs.mean, lowerIsBetter: true },
  { name: "TTFT p99", value: (m) => m.ttftMs.p99, lowerIsBetter: true },
  { name: "decode tok/s per busy s", value: (m) => m.decodeTokPerBusySec, lowerIsBetter: false },
  { name: "prefix-cache hit rate", value: (m) => m.prefixHitRate, lowerIsBetter: false },
];

export function findLosses(runs: readonly TaoBenchRun[]): TaoLoss[] {
  const losses: TaoLoss[] = [];
  const groups = new Map<string, TaoBenchRun[]>();
  for (const run of runs) {
    const key = `${run.workload}@${run.ratePerSec}`;
    groups.set(key, [...(groups.get(key) ?? []), run]);
  }
  for (const group of groups.values()) {
    const others = group.filter((r) => r.policy !== "agentix-tao");
    if (others.length === 0) continue;
    for (const tao of group.filter((r) => r.policy === "agentix-tao")) for (const metric of COMPARED) {
      const mine = metric.value(tao.metrics);
      let best: TaoBenchRun | undefined;
      for (const other of others) {
        const value = metric.value(other.metrics);
        if (!Number.isFinite(value)) continue;
        if (best === undefined || (metric.lowerIsBetter ? value < metric.value(best.metrics) : value > metric.value(best.metrics))) best = other;
      }
      if (best === undefined || !Number.isFinite(mine)) continue;
      const bestValue = metric.value(best.metrics);
      const worseBy = metric.lowerIsBetter ? (mine - bestValue) / Math.abs(bestValue) : (bestValue - mine) / Math.abs(bestValue);
      if (worseBy > LOSS_MARGIN) {
        losses.push({ workload: tao.workload, ratePerSec: tao.ratePerSec, metric: metric.name, ...(tao.holdMs === undefined ? {} : { holdMs: tao.holdMs }), tao: mine, best: bestValue, bestPolicy: best.policy, worseBy });
      }
    }
  }
  return losses;
}

/** Columns padded to their widest cell; numbers right-aligned. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const numeric = header.map((_, i) => rows.length > 0 && rows.every((r) => /^[-+]?[\d.,]+\s*[%a-z]*$|^-$|^n\/a$/.test(r[i] ?? "")));
  const line = (cells: readonly string[]) =>
    cells.map((cell, i) => (i > 0 && numeric[i] ? cell.padStart(widths[i] as number) : cell.padEnd(widths[i] as number))).join("  ").trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : "-");
const seconds = (ms: number) => fixed(ms / 1_000, ms >= 100_000 ? 0 : ms >= 10_000 ? 1 : 2);
const millis = (ms: number) => fixed(ms, ms >= 100 ? 0 : 1);
const percent = (share: number) => (Number.isFinite(share) ? `${(share * 100).toFixed(1)}%` : "-");

export function metricsTable(runs: readonly TaoBenchRun[]): string {
  const header = ["rate/s", "policy", "job mean s", "job p99 s", "TTFT mean ms", "TTFT p99 ms", "TTFT max s", "call mean s", "tok/busy-s", "tok/s", "hit rate", "preempt", "unfinished"];
  const withHold = holdsDiffer(runs);
  const rows = runs.map((r) => {
    const m = r.metrics;
    return [
      String(r.ratePerSec),
      policyLabel(r, withHold),
      seconds(m.jobLatencyMs.mean),
      seconds(m.jobLatencyMs.p99),
      millis(m.ttftMs.mean),
      millis(m.ttftMs.p99),
      seconds(m.ttftMs.max),
      seconds(m.callLatencyMs.mean),
      fixed(m.decodeTokPerBusySec, 0),
      fixed(m.decodeTokPerSec, 0),
      percent(m.prefixHitRate),
      String(m.preemptions),
      String(m.unfinished),
    ];
  });
  return formatTable(header, rows);
}

export function plannerTable(runs: readonly TaoBenchRun[]): string {
  const withHold = holdsDiffer(runs);
  const header = ["workload", "rate/s", ...(withHold ? ["hold"] : []), "plans", "programs/plan", "max", "fallback", "plan mean ms", "plan p95 ms", "plan max ms", "reserved", "used", "expired", "stale skipped", "no slot", "held max", "routed"];
  const rows = runs.flatMap((r) => {
    const t = r.tao;
    if (t === undefined) return [];
    const skipped = Object.values(t.skipped).reduce((a, b) => a + b, 0);
    return [
      [
        r.workload,
        String(r.ratePerSec),
        ...(withHold ? [policyLabel(r, true).replace("agentix-tao hold ", "")] : []),
        String(t.plans),
        fixed(t.snapshotPrograms.mean, 1),
        String(t.snapshotPrograms.max),
        percent(t.fallbackRate),
        fixed(t.planTime.meanMs, 3),
        fixed(t.planTime.p95Ms, 3),
        fixed(t.planTime.maxMs, 2),
        String(t.reservations.made),
        String(t.reservations.used),
        String(t.reservations.expired),
        String(skipped),
        String(t.blocked),
        String(t.heldMax),
        String(t.dispatches.routed),
      ],
    ];
  });
  return formatTable(header, rows);
}

const SOURCES: readonly (ReadinessSource | "all")[] = ["tool-arguments", "tool-history", "global-history", "fallback", "tool-finished", "all"];

export function readinessTable(allRuns: readonly TaoBenchRun[]): string {
  // The predictor does not depend on the hold: one run per load is enough.
  const runs = allRuns.filter((r, i) => allRuns.findIndex((o) => o.workload === r.workload && o.ratePerSec === r.ratePerSec && o.tao !== undefined) === i);
  const header = ["workload", "rate/s", "source", "at tool start: n", "MAE s", "within 0.5 s", "in force at arrival: n", "MAE s", "within 0.5 s"];
  const cell = (r: ReadinessErrorReport) => [String(r.count), r.count === 0 ? "-" : seconds(r.meanAbsErrorMs), r.count === 0 ? "-" : percent(r.withinToleranceShare)];
  const rows = runs.flatMap((r) => {
    const t = r.tao;
    if (t === undefined) return [];
    return SOURCES.filter((s) => t.readiness.atToolStart[s].count + t.readiness.inForceAtArrival[s].count > 0).map((source) => [
      r.workload,
      String(r.ratePerSec),
      source,
      ...cell(t.readiness.atToolStart[source]),
      ...cell(t.readiness.inForceAtArrival[source]),
    ]);
  });
  return formatTable(header, rows);
}

function lossValue(metric: string, value: number): string {
  if (metric.includes("hit rate")) return percent(value);
  if (metric.includes("tok/s")) return fixed(value, 0);
  if (metric.startsWith("TTFT")) return `${millis(value)} ms`;
  return `${seconds(value)} s`;
}

export function lossLines(losses: readonly TaoLoss[]): string {
  const withHold = new Set(losses.map((l) => l.holdMs)).size > 1;
  if (losses.length === 0) return `agentix-tao is within ${LOSS_MARGIN * 100} % of the best policy on every metric and load.`;
  return losses
    .map((l) => `${l.workload} @ ${l.ratePerSec}/s${l.holdMs === undefined || !withHold ? "" : `, ${policyLabel({ policy: "agentix-tao", holdMs: l.holdMs }, true).replace("agentix-tao ", "")}`}: ${l.metric} ${lossValue(l.metric, l.tao)} vs ${lossValue(l.metric, l.best)} (${l.bestPolicy}), ${(l.worseBy * 100).toFixed(0)} % worse`)
    .join("\n");
}
