import type { BenchReport, SweepPoint } from "./bench-report.js";
import { sig3 } from "./format.js";
import type { Ratio } from "./headline.js";

/*
 * The goals a benchmark regime states (issue 10), checked against what the run
 * measured. A goal is PASS or MISS on the measured figure; "n/a" only when the run
 * cannot say (a ratio known only as a bound on the wrong side, or a policy that
 * never ran), and then the table says why. Nothing here is tuned to pass: the
 * figures are the report's own.
 */

export type GoalStatus = "PASS" | "MISS" | "n/a";

export type GoalSpec =
  /** policy sustains ≥ atLeast × reference's rate at equal mean normalised latency (the SLO). */
  | { kind: "ratio"; policy: string; reference: string; atLeast: number }
  /** policy's mean normalised latency ≤ atMost × the oracle's, at every rate where both are stable. */
  | { kind: "oracle-latency"; policy: string; oracle: string; atMost: number }
  /** At policy's highest sustained rate, the pool queue holds at least this share of the calls. */
  | { kind: "held-share"; policy: string; atLeast: number }
  /** No worse than a figure measured earlier (with this benchmark), within a tolerance. */
  | { kind: "ratio-no-worse"; policy: string; reference: string; before: number; tolerance: number; measuredOn: string }
  /**
   * A figure of one group of programs (a tenant's, a kind's) under `policy`, alone or
   * against another group or another policy's same group, at every rate where the runs
   * are stable and `where` holds: the worst must stay within the bound.
   */
  | {
      kind: "group";
      title: string;
      policy: string;
      metric: GroupMetric;
      group: GroupRef;
      versus?: { policy?: string; group?: GroupRef };
      atLeast?: number;
      atMost?: number;
      where?: { heldShareAtLeast?: number; capacityShareAtMost?: number };
    };

export type GroupMetric = "meanMsPerToken" | "completionP99" | "meanSlowdown";

export interface GroupRef {
  by: "tenant" | "kind";
  id: string;
}

export interface GoalResult {
  goal: string;
  target: string;
  measured: string;
  status: GoalStatus;
  /** Why n/a, or what the figure means, when the table alone would not say. */
  note: string | null;
}

function ratioText(r: Ratio): string {
  const prefix = r.relation === "=" ? "" : r.relation === ">=" ? "≥ " : r.relation === "<=" ? "≤ " : `${r.relation} `;
  return `${prefix}${r.value.toFixed(2)}×`;
}

/** PASS / MISS / n/a of "ratio ≥ target" given how the ratio is bounded. */
function ratioStatus(r: Ratio | null, target: number): { status: GoalStatus; note: string | null } {
  if (r === null) return { status: "n/a", note: "both rates are bounds on the same side: widen the rate grid" };
  const lowerBounded = r.relation === "=" || r.relation === ">=" || r.relation === ">";
  const upperBounded = r.relation === "=" || r.relation === "<=" || r.relation === "<";
  if (r.value >= target && lowerBounded) return { status: "PASS", note: null };
  if (r.value < target && upperBounded) return { status: "MISS", note: null };
  return { status: "n/a", note: `the ratio is only known as ${ratioText(r)}: widen the rate grid` };
}

/** The policy's run at its highest sustained rate (else its lowest), for saying why a goal was missed. */
function topPoint(report: BenchReport, policy: string) {
  const points = report.sweep[policy] ?? [];
  const top = report.headline.find((h) => h.policy === policy)?.topRatePerSec ?? null;
  return points.find((p) => p.ratePerSec === top) ?? points[0];
}

/** Why a throughput goal was missed: was ordering engaged, and what did placement do? */
function ratioWhy(report: BenchReport, policy: string, reference: string): string {
  const mine = topPoint(report, policy);
  const held = mine?.metrics.engagement.heldShare ?? null;
  const at = report.compareAt.ratePerSec;
  const hit = (p: string) => report.sweep[p]?.find((x) => x.ratePerSec === at)?.metrics.cacheHitRate ?? null;
  const pct = (x: number | null) => (x === null ? "-" : `${(x * 100).toFixed(1)} %`);
  const engaged =
    held !== null && held >= 0.05
      ? `ordering was engaged (the pool held ${pct(held)} of ${policy}'s calls at its highest sustained rate) and bought only this much`
      : `ordering was not engaged: the pool held ${pct(held)} of ${policy}'s calls at its highest sustained rate, so whatever ${policy} gains comes from placement`;
  return `${engaged} (cache hit ${pct(hit(policy))} vs ${reference}'s ${pct(hit(reference))} at ${sig3(at)}/s)${ceilingText(report, policy, reference)}`;
}

/**
 * What no order could exceed: a stable rate stays under the engines' capacity at steady
 * state, so the ratio is bounded by the best capacity estimate ÷ the reference's
 * sustained rate (ordering reorders work; only placement and caching change how much).
 */
function ceilingText(report: BenchReport, policy: string, reference: string): string {
  const capacities = (report.sweep[policy] ?? []).filter((p) => p.metrics.stability.stable).flatMap((p) => (p.metrics.capacityPerSec === null ? [] : [p.metrics.capacityPerSec]));
  const theirs = report.headline.find((h) => h.policy === reference)?.sustained;
  if (capacities.length === 0 || theirs === undefined || theirs.relation !== "=" || !(theirs.ratePerSec > 0)) return "";
  const capacity = Math.max(...capacities);
  return `; no order sustains more than the engines' capacity at steady state (${sig3(capacity)} prog/s at ${policy}'s cache hit), ${(capacity / theirs.ratePerSec).toFixed(2)}× ${reference}'s ${sig3(theirs.ratePerSec)}/s`;
}

function ratioOf(report: BenchReport, policy: string, reference: string): Ratio | null | undefined {
  const headline = report.headline.find((h) => h.policy === policy);
  if (headline === undefined) return undefined;
  return headline.ratios[reference];
}

function oracleLatency(report: BenchReport, policy: string, oracle: string, atMost: number): GoalResult {
  const goal = `${policy} within ${atMost}× the ${oracle}'s mean normalised latency`;
  const target = `≤ ${atMost}× at every rate both sustain stably`;
  const mine = report.sweep[policy] ?? [];
  const theirs = new Map((report.sweep[oracle] ?? []).map((p) => [p.ratePerSec, p]));
  const pairs = mine.flatMap((p) => {
    const o = theirs.get(p.ratePerSec);
    const a = p.metrics.overall.meanMsPerToken;
    const b = o?.metrics.overall.meanMsPerToken;
    if (o === undefined || a === null || b === null || b === undefined || !(b > 0)) return [];
    if (!p.metrics.stability.stable || !o.metrics.stability.stable) return [];
    return [{ rate: p.ratePerSec, ratio: a / b }];
  });
  if (pairs.length === 0) return { goal, target, measured: "-", status: "n/a", note: `no rate where both ${policy} and ${oracle} ran stably` };
  const worst = pairs.reduce((w, p) => (p.ratio > w.ratio ? p : w));
  const top = pairs[pairs.length - 1] as { rate: number; ratio: number };
  const status = worst.ratio <= atMost ? "PASS" : "MISS";
  return {
    goal,
    target,
    measured: `worst ${worst.ratio.toFixed(2)}× (at ${sig3(worst.rate)}/s); ${top.ratio.toFixed(2)}× at ${sig3(top.rate)}/s, the highest rate both sustain`,
    status,
    note: status === "MISS" ? `knowing each program's remaining work is worth more than ${Math.round((atMost - 1) * 100)} % here: ordering by attained service is far from shortest-remaining-first` : null,
  };
}

function heldShare(report: BenchReport, policy: string, atLeast: number): GoalResult {
  const goal = `the pool queue holds a visible share of ${policy}'s calls`;
  const target = `≥ ${Math.round(atLeast * 100)} % of calls held > 1 ms at its highest sustained rate`;
  const top = report.headline.find((h) => h.policy === policy)?.topRatePerSec ?? null;
  if (top === null) return { goal, target, measured: "-", status: "n/a", note: `${policy} sustained no rate of the grid` };
  const point = report.sweep[policy]?.find((p) => p.ratePerSec === top);
  const share = point?.metrics.engagement.heldShare ?? null;
  if (share === null || point === undefined) return { goal, target, measured: "-", status: "n/a", note: `no calls in ${policy}'s window at ${sig3(top)}/s` };
  const e = point.metrics.engagement;
  const status = share >= atLeast ? "PASS" : "MISS";
  return {
    goal,
    target,
    measured: `${(share * 100).toFixed(1)} % at ${sig3(top)}/s (hold mean ${sig3(e.holdMeanMs)} ms, P99 ${sig3(e.holdP99Ms)} ms)`,
    status,
    note:
      status === "MISS"
        ? `the engines stayed under the pool's admission limits (projected KV within 90 % of capacity, 64 calls in flight, engine waiting ≤ 4): mean batch ${sig3(e.meanBatch)} (max ${e.maxBatch}), KV ${(e.meanKv * 100).toFixed(0)} % mean, ${(e.maxKv * 100).toFixed(0)} % max`
        : null,
  };
}

const METRIC_NAMES: Record<GroupMetric, string> = {
  meanMsPerToken: "mean normalised latency",
  completionP99: "P99 completion time",
  meanSlowdown: "mean slowdown (completion ÷ time alone)",
};

function groupFigure(point: SweepPoint, group: GroupRef, metric: GroupMetric): number | null {
  const g = (group.by === "tenant" ? point.metrics.byTenant : point.metrics.byKind)[group.id];
  if (g === undefined) return null;
  if (metric === "meanMsPerToken") return g.meanMsPerToken;
  if (metric === "completionP99") return g.completionMs?.p99 ?? null;
  return g.meanSlowdown;
}

const groupName = (g: GroupRef) => `${g.by} ${g.id}`;

function groupGoal(report: BenchReport, spec: Extract<GoalSpec, { kind: "group" }>): GoalResult {
  const versusPolicy = spec.versus?.policy ?? spec.policy;
  const versusGroup = spec.versus?.group ?? spec.group;
  const compared = spec.versus !== undefined;
  const bound = spec.atLeast !== undefined ? `≥ ${spec.atLeast}` : `≤ ${spec.atMost ?? Infinity}`;
  const of = `${spec.policy}'s ${groupName(spec.group)}`;
  const against = versusPolicy === spec.policy ? groupName(versusGroup) : `${versusPolicy}'s ${groupName(versusGroup)}`;
  const where = [
    spec.where?.heldShareAtLeast === undefined ? null : `the pool holds ≥ ${Math.round(spec.where.heldShareAtLeast * 100)} % of calls`,
    spec.where?.capacityShareAtMost === undefined ? null : `load ≤ ${Math.round(spec.where.capacityShareAtMost * 100)} % of capacity`,
  ].filter((x) => x !== null);
  const target = `${bound}${compared ? "×" : ""} at every stable rate${where.length === 0 ? "" : ` where ${where.join(" and ")}`}`;
  const mine = report.sweep[spec.policy] ?? [];
  const theirs = new Map((report.sweep[versusPolicy] ?? []).map((p) => [p.ratePerSec, p]));
  const capacities = mine.filter((p) => p.metrics.stability.stable).flatMap((p) => (p.metrics.capacityPerSec === null ? [] : [p.metrics.capacityPerSec]));
  const capacity = capacities.length === 0 ? null : Math.max(...capacities);
  const values = mine.flatMap((p) => {
    const o = theirs.get(p.ratePerSec);
    if (o === undefined || !p.metrics.stability.stable || !o.metrics.stability.stable) return [];
    const held = p.metrics.engagement.heldShare ?? 0;
    if (spec.where?.heldShareAtLeast !== undefined && held < spec.where.heldShareAtLeast) return [];
    if (spec.where?.capacityShareAtMost !== undefined && (capacity === null || p.ratePerSec > spec.where.capacityShareAtMost * capacity)) return [];
    const a = groupFigure(p, spec.group, spec.metric);
    const b = compared ? groupFigure(o, versusGroup, spec.metric) : 1;
    if (a === null || b === null || !(b > 0)) return [];
    return [{ rate: p.ratePerSec, value: a / b, held }];
  });
  const goal = spec.title;
  if (values.length === 0) {
    return { goal, target, measured: "-", status: "n/a", note: `no stable rate of ${spec.policy}${compared ? ` and ${versusPolicy}` : ""} where ${where.join(" and ") || "the figures exist"}` };
  }
  const worst = values.reduce((w, v) => (spec.atLeast !== undefined ? (v.value < w.value ? v : w) : v.value > w.value ? v : w));
  const pass = spec.atLeast !== undefined ? worst.value >= spec.atLeast : worst.value <= (spec.atMost ?? Infinity);
  const figure = `${worst.value.toFixed(2)}${compared ? "×" : ""}`;
  return {
    goal,
    target,
    measured: `worst ${figure} (at ${sig3(worst.rate)}/s, ${(worst.held * 100).toFixed(0)} % held) over ${values.length} rate${values.length === 1 ? "" : "s"}`,
    status: pass ? "PASS" : "MISS",
    note: `${METRIC_NAMES[spec.metric]} of ${of}${compared ? ` ÷ that of ${against}` : ""}`,
  };
}

export function evaluateGoal(report: BenchReport, spec: GoalSpec): GoalResult {
  switch (spec.kind) {
    case "ratio": {
      const goal = `${spec.policy} sustains ≥ ${spec.atLeast}× ${spec.reference} at equal mean normalised latency`;
      const target = `≥ ${spec.atLeast}× at the SLO`;
      const r = ratioOf(report, spec.policy, spec.reference);
      if (r === undefined) return { goal, target, measured: "-", status: "n/a", note: `${spec.policy} or ${spec.reference} did not run` };
      const { status, note } = ratioStatus(r, spec.atLeast);
      return { goal, target, measured: r === null ? "?" : ratioText(r), status, note: status === "MISS" ? ratioWhy(report, spec.policy, spec.reference) : note };
    }
    case "ratio-no-worse": {
      const floor = spec.before * (1 - spec.tolerance);
      const goal = `${spec.policy} ÷ ${spec.reference} no worse than before (${spec.before.toFixed(2)}×, ${spec.measuredOn})`;
      const target = `≥ ${floor.toFixed(2)}× (${Math.round(spec.tolerance * 100)} % tolerance)`;
      const r = ratioOf(report, spec.policy, spec.reference);
      if (r === undefined) return { goal, target, measured: "-", status: "n/a", note: `${spec.policy} or ${spec.reference} did not run` };
      const { status, note } = ratioStatus(r, floor);
      return { goal, target, measured: r === null ? "?" : ratioText(r), status, note };
    }
    case "oracle-latency":
      return oracleLatency(report, spec.policy, spec.oracle, spec.atMost);
    case "held-share":
      return heldShare(report, spec.policy, spec.atLeast);
    case "group":
      return groupGoal(report, spec);
  }
}

export function evaluateGoals(report: BenchReport, specs: readonly GoalSpec[]): GoalResult[] {
  return specs.map((spec) => evaluateGoal(report, spec));
}
