import type { RelayLevelFigures } from "./relay-load.js";
import type { RelayTargetName } from "./relay-options.js";
import type { RelayBenchReport } from "./relay-run.js";
import { poolCpuKey, RELAY_TARGET_LABELS, RELAY_TARGET_ORDER } from "./relay-targets.js";

/*
 * From the relay runs to what people read: per level and target, offered and
 * delivered tokens/s, gaps and TTFT, CPU; a level with any broken stream is FAILED
 * and shows no figure. Then the saturation point: the first level where the pool
 * delivers < 95 % of what is offered, or its p99 gap exceeds 2 × the interval (or
 * streams failed), with the rule that fired. The same rules applied to the engine
 * direct say whether the source and client themselves kept up: where they did not,
 * the pool's figures there are bounded by the machine, not by the pool.
 */

/** Below this share of the offered rate a target did not keep up. */
export const DELIVERED_SHARE_FLOOR = 0.95;
/** Above this multiple of the interval, a p99 gap means tokens are held up. */
export const GAP_P99_CEILING = 2;

export type SaturationRule = "streams failed" | "delivered < 95 % of offered" | "p99 gap > 2 × interval";

export interface RelayRow {
  target: RelayTargetName;
  streams: number;
  offeredTokensPerSecond: number;
  /** Null when the level failed: no figure from broken streams. */
  figures: {
    deliveredTokensPerSecond: number | null;
    deliveredShare: number | null;
    steady: boolean;
    gapP50Ms: number | null;
    gapP99Ms: number | null;
    ttftP50Ms: number | null;
    ttftP99Ms: number | null;
  } | null;
  failed: number;
  failureReasons: Record<string, number>;
  cpuPercent: Record<string, number | null>;
  loadAverage: number;
  rules: SaturationRule[];
}

export interface SaturationPoint {
  streams: number;
  offeredTokensPerSecond: number;
  rules: SaturationRule[];
}

export interface RelaySummary {
  rows: RelayRow[];
  /** First level where the pool did not keep up; null when it kept up at every level (or was not run). */
  poolSaturation: SaturationPoint | null;
  /** First level where the engine direct (source + client) did not keep up. */
  sourceSaturation: SaturationPoint | null;
  /** The pool's best delivered rate over its unfailed levels. */
  poolPeakTokensPerSecond: number | null;
  /** The same of the baseline pool core (--baseline-pool); null when it did not run. */
  baselineSaturation: SaturationPoint | null;
  baselinePeakTokensPerSecond: number | null;
}

export function saturationRules(figures: RelayLevelFigures): SaturationRule[] {
  const rules: SaturationRule[] = [];
  if (figures.failed > 0) rules.push("streams failed");
  const delivered = figures.deliveredTokensPerSecond;
  if (delivered === null || delivered < DELIVERED_SHARE_FLOOR * figures.offeredTokensPerSecond) rules.push("delivered < 95 % of offered");
  const gapP99 = figures.gapMs?.p99;
  if (gapP99 === undefined || gapP99 > GAP_P99_CEILING * figures.intervalMs) rules.push("p99 gap > 2 × interval");
  return rules;
}

function rowOf(target: RelayTargetName, figures: RelayLevelFigures, loadAverage: number): RelayRow {
  const delivered = figures.deliveredTokensPerSecond;
  return {
    target,
    streams: figures.streams,
    offeredTokensPerSecond: figures.offeredTokensPerSecond,
    figures:
      figures.failed > 0
        ? null
        : {
            deliveredTokensPerSecond: delivered,
            deliveredShare: delivered === null ? null : Math.round((delivered / figures.offeredTokensPerSecond) * 1000) / 1000,
            steady: figures.steadyWindowMs !== null,
            gapP50Ms: figures.gapMs?.p50 ?? null,
            gapP99Ms: figures.gapMs?.p99 ?? null,
            ttftP50Ms: figures.ttftMs?.p50 ?? null,
            ttftP99Ms: figures.ttftMs?.p99 ?? null,
          },
    failed: figures.failed,
    failureReasons: figures.failureReasons,
    cpuPercent: figures.cpuPercent,
    loadAverage,
    rules: saturationRules(figures),
  };
}

function firstSaturated(rows: RelayRow[], target: RelayTargetName): SaturationPoint | null {
  const row = rows.find((r) => r.target === target && r.rules.length > 0);
  return row ? { streams: row.streams, offeredTokensPerSecond: row.offeredTokensPerSecond, rules: row.rules } : null;
}

function peakRate(rows: RelayRow[], target: RelayTargetName): number | null {
  const rates = rows
    .filter((r) => r.target === target)
    .map((r) => r.figures?.deliveredTokensPerSecond)
    .filter((rate): rate is number => typeof rate === "number");
  return rates.length > 0 ? Math.max(...rates) : null;
}

export function summariseRelayReport(report: RelayBenchReport): RelaySummary {
  const rows = report.runs
    .filter((run) => run.phase === "measure")
    .map((run) => rowOf(run.target, run.figures, run.loadAverage))
    .sort((a, b) => a.streams - b.streams || RELAY_TARGET_ORDER.indexOf(a.target) - RELAY_TARGET_ORDER.indexOf(b.target));
  return {
    rows,
    poolSaturation: firstSaturated(rows, "pool"),
    sourceSaturation: firstSaturated(rows, "engine"),
    poolPeakTokensPerSecond: peakRate(rows, "pool"),
    baselineSaturation: firstSaturated(rows, "pool-baseline"),
    baselinePeakTokensPerSecond: peakRate(rows, "pool-baseline"),
  };
}

/** Every failed level, one line each; empty when every stream of every measured level was complete. */
export function relayFailures(summary: RelaySummary): string[] {
  return summary.rows
    .filter((r) => r.failed > 0)
    .map((r) => {
      const reasons = Object.entries(r.failureReasons)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 3)
        .map(([reason, count]) => `${count}× ${reason}`)
        .join("; ");
      return `${RELAY_TARGET_LABELS[r.target]} at ${r.streams} streams: ${r.failed}/${r.streams} streams failed (${reasons})`;
    });
}

const fixed = (value: number | null | undefined, digits = 1) => (value === null || value === undefined ? "—" : value.toFixed(digits));
const cpu = (value: number | null | undefined) => (value === null || value === undefined ? "—" : `${value.toFixed(0)} %`);

export function formatRelayTable(report: RelayBenchReport, summary: RelaySummary = summariseRelayReport(report)): string {
  const header = [
    "streams".padStart(7),
    "target".padEnd(6),
    "offered tok/s".padStart(13),
    "delivered".padStart(9),
    "share".padStart(6),
    "gap p50".padStart(7),
    "gap p99".padStart(7),
    "ttft p50".padStart(8),
    "ttft p99".padStart(8),
    "pool cpu".padStart(8),
    "pool wait".padStart(9),
    "source cpu".padStart(10),
    "client cpu".padStart(10),
    "load".padStart(5),
  ].join("  ");
  const lines = summary.rows.map((row) => {
    const start = [String(row.streams).padStart(7), RELAY_TARGET_LABELS[row.target].padEnd(6), String(row.offeredTokensPerSecond).padStart(13)];
    const key = poolCpuKey(row.target);
    const tail = [
      (key === undefined ? "—" : cpu(row.cpuPercent[key])).padStart(8),
      (key === undefined ? "—" : cpu(row.cpuPercent[`${key}Wait`])).padStart(9),
      cpu(row.cpuPercent.source).padStart(10),
      cpu(row.cpuPercent.client).padStart(10),
      row.loadAverage.toFixed(1).padStart(5),
    ];
    const f = row.figures;
    if (f === null) {
      return [...start, `FAILED: ${row.failed}/${row.streams} streams broken or short, no figure`.padEnd(60), ...tail].join("  ");
    }
    const share = f.deliveredShare === null ? "—" : `${Math.round(f.deliveredShare * 100)} %`;
    return [
      ...start,
      `${f.deliveredTokensPerSecond ?? "—"}${f.steady ? "" : "*"}`.padStart(9),
      share.padStart(6),
      fixed(f.gapP50Ms).padStart(7),
      fixed(f.gapP99Ms).padStart(7),
      fixed(f.ttftP50Ms).padStart(8),
      fixed(f.ttftP99Ms).padStart(8),
      ...tail,
    ].join("  ");
  });
  return [header, ...lines].join("\n");
}

function describePoint(point: SaturationPoint): string {
  return `${point.streams} streams (${point.offeredTokensPerSecond} tokens/s offered): ${point.rules.join(", ")}`;
}

/** The lines under the table: the saturation point and whether the source kept up. */
export function formatRelayVerdict(report: RelayBenchReport, summary: RelaySummary = summariseRelayReport(report)): string {
  const lines: string[] = [];
  const { intervalMs, levels } = report.options;
  const ran = (target: RelayTargetName) => report.options.targets.includes(target);
  if (ran("pool")) {
    lines.push(
      summary.poolSaturation
        ? `Pool saturates at ${describePoint(summary.poolSaturation)}.`
        : `Pool kept up at every level (up to ${Math.max(...levels)} streams): no saturation found.`,
    );
    if (summary.poolPeakTokensPerSecond !== null) lines.push(`Pool's best delivered rate: ${summary.poolPeakTokensPerSecond} tokens/s.`);
  }
  if (summary.rows.some((r) => r.target === "pool-baseline")) {
    lines.push(
      summary.baselineSaturation
        ? `Baseline pool (pool0) saturates at ${describePoint(summary.baselineSaturation)}.`
        : `Baseline pool (pool0) kept up at every level (up to ${Math.max(...levels)} streams).`,
    );
    if (summary.baselinePeakTokensPerSecond !== null) lines.push(`Baseline pool's best delivered rate: ${summary.baselinePeakTokensPerSecond} tokens/s.`);
  }
  if (ran("engine")) {
    lines.push(
      summary.sourceSaturation
        ? `SOURCE SATURATED: the engine direct did not keep up at ${describePoint(summary.sourceSaturation)}; ` +
            `from there on the figures are bounded by the source and client on this machine, not by the pool.`
        : "The engine direct delivered its offered rate at every level (the source and client kept up).",
    );
  }
  lines.push(
    `Rules: delivered < ${DELIVERED_SHARE_FLOOR * 100} % of offered, or p99 gap > ${GAP_P99_CEILING} × ${intervalMs} ms, or any stream broken. ` +
      "Gaps and TTFT in ms at the client; CPU in % of one core over the steady window; pool wait: % of that time the pool was " +
      "runnable but waiting for a CPU (starved by the machine); * = every stream active together for less than half a stream (rate over the whole run).",
  );
  return lines.join("\n");
}

export function relayReportHeader(report: RelayBenchReport): string {
  const { machine, options } = report;
  return (
    `Streaming relay throughput: ${options.tokens} tokens per stream, one every ${options.intervalMs} ms ` +
    `(${Math.round(1000 / options.intervalMs)} tokens/s a stream); ${machine.cpus} CPUs (${machine.cpuModel}), Node ${machine.node}, ` +
    `load average ${machine.loadAverage.start} → ${machine.loadAverage.end}`
  );
}
