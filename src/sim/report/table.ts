import type { BenchReport, SweepPoint } from "./bench-report.js";
import { NONE, percent, rate, ratio, seconds, sig3 } from "./format.js";

/*
 * The headline table: one row per policy. The same cells feed the terminal table and
 * the HTML report, so they cannot disagree.
 */

export interface HeadlineTable {
  headers: string[];
  rows: string[][];
}

/** The sweep point at the rate the report compares policies at (its CDF load). */
export function pointAt(report: BenchReport, policy: string, ratePerSec: number): SweepPoint | undefined {
  return report.sweep[policy]?.find((p) => p.ratePerSec === ratePerSec);
}

export function headlineTable(report: BenchReport): HeadlineTable {
  const load = report.cdf.ratePerSec;
  const headers = [
    "policy",
    "sustained prog/s",
    `× ${report.baseline}`,
    `mean ms/tok @${sig3(load)}/s`,
    "P95 ms/tok",
    "P99 ms/tok",
    "longest-10% P99",
    "cache hit",
    "preempt",
    "batch makespan",
  ];
  const rows = report.headline.map((h) => {
    const point = pointAt(report, h.policy, load);
    const m = point?.metrics;
    const latency = m?.normalizedLatencyMsPerToken ?? null;
    const batch = report.batch.find((b) => b.policy === h.policy);
    const unfinished = m !== undefined && m.unfinished > 0 ? ` (${m.unfinished} unfinished)` : "";
    return [
      h.policy,
      rate(h.sustained),
      ratio(h.ratio),
      latency === null ? NONE : `${sig3(latency.mean)}${unfinished}`,
      sig3(latency?.p95),
      sig3(latency?.p99),
      m === undefined ? NONE : `${m.longestTenth.unfinished > 0 ? "≥" : ""}${seconds(m.longestTenth.completionP99Ms)}`,
      percent(m?.prefixCache.hitRate),
      m === undefined ? NONE : String(m.preemptions),
      batch === undefined ? NONE : batch.makespanMs === null ? `unfinished (${batch.metrics.unfinished})` : seconds(batch.makespanMs),
    ];
  });
  return { headers, rows };
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
  return `${[line(table.headers, true), rule, ...table.rows.map((r) => line(r, false))].join("\n")}\n`;
}

/** The lines printed above the table: what was run and how to read it. */
export function tablePreamble(report: BenchReport): string {
  const c = report.config;
  return [
    `workload ${c.workloadName} · ${c.programsPerRun} programs per run · ${c.engines} × ${c.engineProfile} · pool buffer ${c.maxInFlightPerEngine}/engine · tool time ×${c.gapScale} · seed ${c.seed}`,
    `rates (prog/s): ${c.rates.map(sig3).join(", ")}${c.ratesSource === "capacity-estimate" && c.capacityEstimatePerSec !== null ? ` (ladder around a capacity estimate of ${sig3(c.capacityEstimatePerSec)} prog/s)` : ""}`,
    `SLO: mean normalised latency ≤ ${sig3(report.slo.msPerToken)} ms/token (${report.slo.explanation})`,
    `sustained = highest arrival rate meeting the SLO (log-log interpolation between ladder rates); ≥ means every rate met it, < that none did`,
    ...report.notes.map((note) => `NOTE: ${note}`),
    `per-load columns at ${sig3(report.cdf.ratePerSec)} prog/s (${report.cdf.why}); longest-10% = by prompt+generated tokens; batch = all ${c.programsPerRun} programs at t = 0`,
  ].join("\n");
}
