import type { BenchReport, SweepPoint } from "./bench-report.js";
import { NONE, percent, rate, ratio, seconds, sig3 } from "./format.js";
import type { GroupMetrics } from "./steady-state.js";

/*
 * The benchmark's tables. The same cells feed the terminal and the HTML report, so
 * they cannot disagree. Every table says whether ordering was engaged: the share of
 * calls the pool queue held ("held") is in each, and the engagement table has the rest.
 */

export interface HeadlineTable {
  /** What the table is, printed above it. */
  title?: string;
  headers: string[];
  rows: string[][];
  /** Printed below it, numbered as the cells cite them ([1], [2], …). */
  footnotes?: string[];
}

/** A policy's run at a rate. */
export function pointAt(report: BenchReport, policy: string, ratePerSec: number): SweepPoint | undefined {
  return report.sweep[policy]?.find((p) => p.ratePerSec === ratePerSec);
}

/** Mean with ≥ when it counts unfinished programs at a lower bound. */
function meanCell(g: GroupMetrics | undefined): string {
  if (g === undefined || g.meanMsPerToken === null) return NONE;
  return `${g.meanIsLowerBound ? "≥" : ""}${sig3(g.meanMsPerToken)}`;
}

function refHeader(reference: string): string {
  return `× ${reference}`;
}

export function headlineTable(report: BenchReport): HeadlineTable {
  const load = report.compareAt.ratePerSec;
  const headers = [
    "policy",
    "sustained prog/s",
    ...report.references.map(refHeader),
    `mean ms/tok @${sig3(load)}/s`,
    "P95",
    "P99",
    "longest-10% P99",
    "cache hit",
    "held",
    "preempt",
  ];
  const rows = report.headline.map((h) => {
    const point = pointAt(report, h.policy, load);
    const m = point?.metrics;
    const latency = m?.overall.normalizedLatencyMsPerToken ?? null;
    return [
      h.policy,
      rate(h.sustained),
      ...report.references.map((r) => ratio(h.ratios[r] ?? null)),
      `${meanCell(m?.overall)}${m !== undefined && !m.stability.stable ? " (unstable)" : ""}`,
      sig3(latency?.p95),
      sig3(latency?.p99),
      m === undefined ? NONE : `${m.longestTenthUnfinished > 0 ? "≥" : ""}${seconds(m.longestTenthP99Ms)}`,
      percent(m?.cacheHitRate),
      percent(m?.engagement.heldShare),
      m === undefined ? NONE : String(m.engagement.preemptions),
    ];
  });
  return { title: `Throughput at equal mean normalised latency (SLO ${sig3(report.slo.msPerToken)} ms/token); per-load columns at ${sig3(load)} prog/s (${report.compareAt.why})`, headers, rows };
}

/** Was ordering engaged? Each policy at its highest sustained rate (else its lowest). */
export function engagementTable(report: BenchReport): HeadlineTable {
  const headers = ["policy", "at prog/s", "held", "hold mean ms", "hold P99 ms", "held calls' mean ms", "promoted", "batch mean", "batch max", "KV mean", "KV max", "busy", "preempt", "capacity prog/s"];
  const rows = report.headline.map((h) => {
    const points = report.sweep[h.policy] ?? [];
    const at = h.topRatePerSec ?? points[0]?.ratePerSec;
    const m = at === undefined ? undefined : pointAt(report, h.policy, at)?.metrics;
    if (m === undefined || at === undefined) return [h.policy, ...headers.slice(1).map(() => NONE)];
    const e = m.engagement;
    return [
      h.policy,
      `${sig3(at)}${h.topRatePerSec === null ? " (none met)" : ""}`,
      percent(e.heldShare),
      sig3(e.holdMeanMs),
      sig3(e.holdP99Ms),
      sig3(e.heldMeanMs),
      String(e.promotedCalls),
      sig3(e.meanBatch),
      String(e.maxBatch),
      percent(e.meanKv),
      percent(e.maxKv),
      percent(e.busyShare),
      String(e.preemptions),
      sig3(m.capacityPerSec),
    ];
  });
  return {
    title: "Was ordering engaged? Each policy at its highest sustained rate, inside the window: calls held in the pool queue (> 1 ms), hold times over all calls, anti-starvation promotions, per-engine batch and KV use (means over engines, time-weighted), preemptions",
    headers,
    rows,
  };
}

/** Autellix's figure as a table: mean normalised latency per rate and policy (* = unstable: not sustained). */
export function curveTable(report: BenchReport, pick: "mean" | "held" = "mean"): HeadlineTable {
  const policies = report.config.policies;
  const rates = report.config.rates;
  const rows = rates.map((r) => [
    sig3(r),
    ...policies.map((policy) => {
      const m = pointAt(report, policy, r)?.metrics;
      if (m === undefined) return NONE;
      if (pick === "held") return percent(m.engagement.heldShare);
      const over = m.overall.meanMsPerToken !== null && m.overall.meanMsPerToken > report.slo.msPerToken ? "!" : "";
      return `${meanCell(m.overall)}${m.stability.stable ? "" : "*"}${over}`;
    }),
  ]);
  return pick === "mean"
    ? { title: `Mean normalised latency (ms/token) by arrival rate: * unstable (not sustained), ! over the SLO (${sig3(report.slo.msPerToken)}), ≥ counts unfinished programs at a lower bound`, headers: ["prog/s", ...policies], rows }
    : { title: "Share of calls held in the pool queue (> 1 ms) by arrival rate", headers: ["prog/s", ...policies], rows };
}

/** Sustained rates at several latency levels (× the baseline's mean at the lowest rate). */
export function equalLatencyTable(report: BenchReport): HeadlineTable {
  const headers = ["policy", ...report.equalLatency.flatMap((level) => [`@${sig3(level.factor)}× (${sig3(level.msPerToken)} ms/tok)`, ...report.references.map(refHeader)])];
  const rows = report.config.policies.map((policy) => [
    policy,
    ...report.equalLatency.flatMap((level) => {
      const entry = level.perPolicy.find((e) => e.policy === policy);
      return entry === undefined ? [NONE, ...report.references.map(() => NONE)] : [rate(entry.sustained), ...report.references.map((r) => ratio(entry.ratios[r] ?? null))];
    }),
  ]);
  return { title: `Sustained prog/s at other latency levels (× ${report.baseline}'s mean at the lowest rate)`, headers, rows };
}

/** Per program kind or tenant: each group judged on its own SLO, with its latency and held share at the comparison rate. */
export function groupTable(report: BenchReport, by: "kind" | "tenant"): HeadlineTable {
  const groups = by === "kind" ? report.byKind : report.byTenant;
  const load = report.compareAt.ratePerSec;
  const headers = [by, "policy", "group SLO ms/tok", "sustained prog/s", `× ${report.baseline}`, `programs @${sig3(load)}/s`, "mean ms/tok", "P99", "held"];
  const rows = groups.flatMap((g) =>
    g.perPolicy.map((entry) => {
      const m = pointAt(report, entry.policy, load)?.metrics;
      const gm = by === "kind" ? m?.byKind[g.group] : m?.byTenant[g.group];
      return [
        g.group,
        entry.policy,
        sig3(g.sloMsPerToken),
        entry.sustained === null ? NONE : rate(entry.sustained),
        ratio(entry.ratio),
        gm === undefined ? NONE : String(gm.programs),
        meanCell(gm),
        sig3(gm?.normalizedLatencyMsPerToken?.p99),
        percent(gm?.heldShare),
      ];
    }),
  );
  return {
    title: `Per ${by}: sustained = highest overall arrival rate at which the run is stable and the ${by}'s mean stays under its own SLO (${report.slo.source === "default" ? "the same factor" : "the same ratio to the SLO"} on ${report.baseline}'s ${by} mean at the lowest rate); figures at ${sig3(load)} prog/s`,
    headers,
    rows,
  };
}

export function goalsTable(report: BenchReport): HeadlineTable {
  const footnotes: string[] = [];
  const rows = report.goals.map((g) => {
    if (g.note === null) return [g.goal, g.target, g.measured, g.status];
    footnotes.push(g.note);
    return [g.goal, g.target, `${g.measured} [${footnotes.length}]`, g.status];
  });
  return { title: `Goals (${report.config.regime ?? "no regime"}): PASS or MISS on the measured figure`, headers: ["goal", "target", "measured", "status"], rows, footnotes };
}

const NUMERIC = /^[≥≤<>]?[-\d.]/;

/** Aligned text: the first column left, cells that start with a number right-aligned. */
export function formatTextTable(table: HeadlineTable): string {
  const widths = table.headers.map((h, i) => Math.max(h.length, ...table.rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[], header: boolean) =>
    cells
      .map((cell, i) => {
        const width = widths[i] ?? 0;
        return i > 0 && (header || NUMERIC.test(cell)) ? cell.padStart(width) : cell.padEnd(width);
      })
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "─".repeat(w)).join("  ");
  const title = table.title === undefined ? [] : [table.title];
  const notes = (table.footnotes ?? []).map((note, i) => `[${i + 1}] ${note}`);
  return `${[...title, line(table.headers, true), rule, ...table.rows.map((r) => line(r, false)), ...notes].join("\n")}\n`;
}

/** The lines printed above the tables: what was run and how to read it. */
export function tablePreamble(report: BenchReport): string {
  const c = report.config;
  const weights = Object.keys(c.planWeights).length === 0 ? "equal plan weights" : `plan weights ${Object.entries(c.planWeights).map(([t, w]) => `${t} ${w}`).join(", ")} (others 1)`;
  return [
    ...(c.regime === null ? [] : [`regime ${c.regime}`]),
    `workload ${c.workloadName} · ${c.programsPerRun} programs per run · ${c.engines} × ${c.engineProfile} · pool buffer ${c.maxInFlightPerEngine}/engine · tool time ×${c.gapScale} · seed ${c.seed} · ${weights}`,
    `rates (prog/s): ${c.rates.map(sig3).join(", ")} (${c.ratesSource === "regime" ? "the regime's grid" : c.ratesSource === "user" ? "given" : "ladder around the capacity estimate"})`,
    ...(c.capacity === null ? [] : [`capacity from steady-state busy time: ${sig3(c.capacity.perSec)} prog/s (${c.capacity.source})`]),
    `SLO: mean normalised latency ≤ ${sig3(report.slo.msPerToken)} ms/token (${report.slo.explanation})`,
    `steady state: warm-up ${percent(c.window.warmupFraction)} and cool-down ${percent(c.window.cooldownFraction)} of the programs excluded; a rate is sustained only if stable across the window (the backlog — programs in the system beyond running alone — and the calls waiting grow by < ${percent(c.stability.maxGrowthShare)} of the window's arrivals, the last third's median slowdown < ${c.stability.maxLatencyGrowth}× the first third's, every measured program finished, the window ≥ ${c.stability.minWindowDurations}× the median unloaded program) and its mean ≤ SLO`,
    `sustained = log-log interpolation to a stable first miss, else the last rate met; ≥ means every rate met it, < that none did`,
    ...report.notes.map((note) => `NOTE: ${note}`),
  ].join("\n");
}

/** The paper comparison, when the regime has one. */
export function paperLines(report: BenchReport): string {
  const p = report.paper;
  if (p === null) return "";
  return [`Paper: ${p.paper}`, `Ours:  ${p.ours}`, ...p.explanation.map((line) => `  - ${line}`)].join("\n");
}

/** Every table, in print order. */
export function allTables(report: BenchReport): HeadlineTable[] {
  return [
    headlineTable(report),
    engagementTable(report),
    curveTable(report, "mean"),
    curveTable(report, "held"),
    equalLatencyTable(report),
    groupTable(report, "kind"),
    ...(report.byTenant.length > 1 ? [groupTable(report, "tenant")] : []),
    ...(report.goals.length > 0 ? [goalsTable(report)] : []),
  ];
}
