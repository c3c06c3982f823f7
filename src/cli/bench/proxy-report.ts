import type { ProxyMode, ProxyTargetName } from "./proxy-options.js";
import { gcPauseMs } from "./gc-meter.js";
import { PORTKEY_VERSION } from "./proxy-portkey.js";
import type { ProxyBenchReport, TargetRun } from "./proxy-run.js";
import { TARGET_LABELS } from "./proxy-targets.js";
import { placementLine } from "./placement.js";

/*
 * From raw runs to the figures people read: per target and mode, throughput and
 * latency at the headline concurrency, latency added over the bare engine, the
 * best throughput over the levels, and every failure. Plus the edge's own share,
 * (d) − (b), since the edge run goes through the pool too.
 */

export interface FailureCounts {
  non2xx: number;
  errors: number;
  timeouts: number;
  mismatches: number;
  shortfall: number;
  /** Measured runs in which no response completed (no figure to report). */
  emptyRuns: number;
  statusCodes: Record<string, number>;
}

export interface ProxySummaryRow {
  mode: ProxyMode;
  target: ProxyTargetName;
  label: string;
  /** At the headline concurrency. */
  connections: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Over (a) at the headline concurrency; null for (a) or without it. */
  addedP50Ms: number | null;
  addedP99Ms: number | null;
  /** Medians over rounds. At one connection (pure per-call cost, no queueing), when measured. */
  p50AtOneMs: number | null;
  addedP50AtOneMs: number | null;
  /** Lowest and highest of the rounds' +p50@1 (the median's spread). */
  addedP50AtOneRangeMs: [number, number] | null;
  maxRps: number;
  maxRpsConnections: number;
  /** CPU µs of the target's own process per completed response, over its measured runs; null when not read. */
  cpuUsPerCall: number | null;
  /** The main thread's GC pause µs of that process per completed response, over its measured runs (gc-meter.ts); null when not read. */
  gcUsPerCall: number | null;
  /** Its full (mark-compact) collections per 10,000 completed responses, over the same runs; null when not read. */
  fullGcsPer10k: number | null;
  /** Over every run of this target and mode, warm-up included. */
  failures: FailureCounts;
  failed: boolean;
}

/**
 * `scale` × what `valueOf` reads of the measured runs that have it, summed, per completed
 * response of those runs (a process's CPU ms, its GC); null when no run has it.
 */
function perResponse(runs: Iterable<TargetRun>, valueOf: (run: TargetRun) => number | undefined, scale: number): number | null {
  let sum = 0;
  let responses = 0;
  for (const run of runs) {
    const value = run.phase === "measure" ? valueOf(run) : undefined;
    if (value === undefined) continue;
    sum += value;
    responses += run.figures.responses;
  }
  return responses > 0 ? Math.round((scale * sum) / responses) : null;
}

/** The edge's own cost: (d) edge + pool + engine minus (b) pool + engine. */
export interface EdgeOnlyRow {
  mode: ProxyMode;
  addedP50Ms: number;
  addedP99Ms: number;
  addedP50AtOneMs: number | null;
}

const diff = (a: number, b: number) => Math.round((a - b) * 1000) / 1000;

/** The median of `values` (NaN when there are none). */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** A target's measured runs at one level, by round. */
function measuredRuns(runs: TargetRun[], mode: ProxyMode, target: ProxyTargetName, connections: number): Map<number, TargetRun> {
  const byRound = new Map<number, TargetRun>();
  for (const r of runs) {
    if (r.phase === "measure" && r.mode === mode && r.target === target && r.figures.connections === connections) byRound.set(r.round, r);
  }
  return byRound;
}

/** The median over rounds of one figure of a target's runs at a level; undefined when never measured there. */
function medianOf(byRound: Map<number, TargetRun>, figure: (run: TargetRun) => number): number | undefined {
  return byRound.size === 0 ? undefined : median([...byRound.values()].map(figure));
}

/**
 * Latency a target adds over the engine: the median over rounds of the difference
 * within each round (the two ran back to back, so a round's machine load hits both).
 */
function pairedDifferences(target: Map<number, TargetRun>, base: Map<number, TargetRun>, figure: (run: TargetRun) => number): number[] {
  const paired: number[] = [];
  for (const [round, run] of target) {
    const baseRun = base.get(round);
    if (baseRun) paired.push(figure(run) - figure(baseRun));
  }
  return paired;
}

function medianAdded(target: Map<number, TargetRun>, base: Map<number, TargetRun>, figure: (run: TargetRun) => number): number | null {
  const paired = pairedDifferences(target, base, figure);
  return paired.length === 0 ? null : diff(median(paired), 0);
}

/** Lowest and highest of the rounds' differences: the run's own noise, shown beside the median. */
function addedRange(target: Map<number, TargetRun>, base: Map<number, TargetRun>, figure: (run: TargetRun) => number): [number, number] | null {
  const paired = pairedDifferences(target, base, figure);
  return paired.length === 0 ? null : [diff(Math.min(...paired), 0), diff(Math.max(...paired), 0)];
}

const p50Of = (run: TargetRun) => run.figures.latencyMs.p50;
const p99Of = (run: TargetRun) => run.figures.latencyMs.p99;
const rpsOf = (run: TargetRun) => run.figures.requestsPerSecond;

function failureCounts(runs: TargetRun[]): FailureCounts {
  const counts: FailureCounts = { non2xx: 0, errors: 0, timeouts: 0, mismatches: 0, shortfall: 0, emptyRuns: 0, statusCodes: {} };
  for (const { figures, shortfall, phase } of runs) {
    if (phase === "measure" && figures.responses === 0) counts.emptyRuns++;
    counts.non2xx += figures.non2xx;
    counts.errors += figures.errors;
    counts.timeouts += figures.timeouts;
    counts.mismatches += figures.mismatches;
    counts.shortfall += shortfall;
    for (const [code, count] of Object.entries(figures.statusCodes)) counts.statusCodes[code] = (counts.statusCodes[code] ?? 0) + count;
  }
  return counts;
}

export function summariseProxyReport(report: ProxyBenchReport): { rows: ProxySummaryRow[]; edgeOnly: EdgeOnlyRow[] } {
  const { runs, options } = report;
  const moderate = options.moderateConnections;
  const rows: ProxySummaryRow[] = [];
  const edgeOnly: EdgeOnlyRow[] = [];
  const none = new Map<number, TargetRun>();
  for (const mode of options.modes) {
    for (const { name: target } of report.targets) {
      const own = runs.filter((r) => r.mode === mode && r.target === target);
      const head = measuredRuns(runs, mode, target, moderate);
      const base = target === "engine" ? none : measuredRuns(runs, mode, "engine", moderate);
      const one = measuredRuns(runs, mode, target, 1);
      const baseOne = target === "engine" ? none : measuredRuns(runs, mode, "engine", 1);
      // Best level by median rate over rounds.
      let maxRps = Number.NaN;
      let maxRpsConnections = 0;
      for (const connections of options.connections) {
        const rate = medianOf(measuredRuns(runs, mode, target, connections), rpsOf);
        if (rate !== undefined && !(rate <= maxRps)) {
          maxRps = rate;
          maxRpsConnections = connections;
        }
      }
      const failures = failureCounts(own);
      const cpuUsPerCall = perResponse(own, (r) => r.cpuMs, 1000);
      const gcUsPerCall = perResponse(own, (r) => (r.gc === undefined ? undefined : gcPauseMs(r.gc)), 1000);
      const fullGcsPer10k = perResponse(own, (r) => r.gc?.majorCount, 10_000);
      rows.push({
        mode,
        target,
        label: TARGET_LABELS[target],
        connections: moderate,
        rps: medianOf(head, rpsOf) ?? Number.NaN,
        p50Ms: medianOf(head, p50Of) ?? Number.NaN,
        p99Ms: medianOf(head, p99Of) ?? Number.NaN,
        addedP50Ms: medianAdded(head, base, p50Of),
        addedP99Ms: medianAdded(head, base, p99Of),
        p50AtOneMs: medianOf(one, p50Of) ?? null,
        addedP50AtOneMs: medianAdded(one, baseOne, p50Of),
        addedP50AtOneRangeMs: addedRange(one, baseOne, p50Of),
        maxRps,
        maxRpsConnections,
        cpuUsPerCall,
        gcUsPerCall,
        fullGcsPer10k,
        failures,
        failed: failures.non2xx + failures.errors + failures.mismatches + failures.shortfall + failures.emptyRuns > 0,
      });
    }
    const edge = measuredRuns(runs, mode, "edge", moderate);
    const pool = measuredRuns(runs, mode, "pool", moderate);
    if (edge.size > 0 && pool.size > 0) {
      edgeOnly.push({
        mode,
        addedP50Ms: medianAdded(edge, pool, p50Of) ?? Number.NaN,
        addedP99Ms: medianAdded(edge, pool, p99Of) ?? Number.NaN,
        addedP50AtOneMs: medianAdded(measuredRuns(runs, mode, "edge", 1), measuredRuns(runs, mode, "pool", 1), p50Of),
      });
    }
  }
  return { rows, edgeOnly };
}

/** One line per target and mode that saw anything but verified 2xx answers. */
export function proxyFailures(rows: ProxySummaryRow[]): string[] {
  return rows
    .filter((row) => row.failed)
    .map((row) => {
      const f = row.failures;
      const codes = Object.entries(f.statusCodes)
        .filter(([code]) => !code.startsWith("2"))
        .map(([code, count]) => `${code}×${count}`)
        .join(", ");
      return (
        `${row.label} ${row.mode}: ${f.non2xx} non-2xx${codes ? ` (${codes})` : ""}, ${f.errors} connection errors ` +
        `(${f.timeouts} timeouts), ${f.mismatches} incomplete/wrong bodies, ${f.shortfall} unsigned (presigned stock ran out), ` +
        `${f.emptyRuns} runs with no completed response (raise --duration)`
      );
    });
}

/** Below this many responses a run's percentiles are flagged as rough. */
const THIN_RUN_RESPONSES = 20;

const num = (value: number | null, digits: number) => (value === null || Number.isNaN(value) ? "—" : value.toFixed(digits));
const signed = (value: number | null) => (value === null || Number.isNaN(value) ? "—" : `${value >= 0 ? "+" : ""}${value.toFixed(2)}`);

function alignTable(header: string[], rows: string[][], leftColumns: number): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => (row[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i] ?? 0) : cell.padStart(widths[i] ?? 0))).join("  ").trimEnd();
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

export function proxyReportHeader(report: ProxyBenchReport): string {
  const o = report.options;
  const cores = report.machine.cpus;
  const names = new Set(report.targets.map((t) => t.name));
  const targetLines = [
    names.has("engine") && "(a) engine direct",
    names.has("node-proxy") && "(n) minimal node:http proxy → engine (keep-alive agent, pipes both ways: the floor of a Node hop)",
    names.has("pool") &&
      `(b) pool core${o.poolTree === undefined ? "" : ` built from ${o.poolTree}`} → engine; calls presigned as the edge signs them (fresh call ID each, in the time window); pool buffer ${o.engineInFlight} calls/engine`,
    names.has("pool-baseline") && `(b0) the same pool core built from ${o.baselinePoolTree ?? "another tree"} (the before of a change), in the same rounds`,
    names.has("portkey") && `(c) Portkey gateway ${PORTKEY_VERSION} (provider openai, custom host) → engine`,
    names.has("edge") && "(d) edge under wrangler dev (local workerd, D1, Durable Objects; one program per connection) → pool → engine",
  ].filter((line): line is string => typeof line === "string");
  const notes = [
    `CAVEAT: the load generator (autocannon, one Node process), the engine, the pool, Portkey and wrangler/workerd all`,
    `share these ${cores} cores over loopback (each server in its own process), so the figures compare the paths with each`,
    `other; they are not what a dedicated server would sustain. Other work on the machine shows up as noise.`,
    ...(names.has("edge")
      ? [
          `(d) includes the pool: the edge's own share is (d) − (b), below. wrangler dev's local runtime is not Cloudflare's`,
          `production runtime; its local D1/DO state was in ${report.edgeStateBase ?? "?"}` +
            (report.edgeStateBase === "/dev/shm" ? " (tmpfs: on disk every write waits for fsync, 2–4× slower here)." : "."),
        ]
      : []),
    ...(names.has("portkey")
      ? [
          `Portkey runs with a preload giving its upstream fetch() responses mutable headers (the fix for its issues`,
          `#1389/#1550; without it every streaming call fails with "TypeError: immutable"). Its stream handler waits 25 ms`,
          `before relaying the first chunk, which shows in its streaming latency.`,
        ]
      : []),
  ];
  return [
    `Agentix proxy overhead benchmark — ${report.startedAt}`,
    `Machine: ${cores} CPU cores (${report.machine.cpuModel}), Node ${report.machine.node}, ${report.machine.platform};`,
    `1-min load average ${report.machine.loadAverage.start} at start, ${report.machine.loadAverage.end} at the end.`,
    `Placement: ${placementLine(o.placement, report.cpus)} (--placement).`,
    `Engine: simulated vLLM (${report.model}), zero model time: latency is HTTP, relay and proxy work only.`,
    `Request: chat completion, max_tokens ${o.maxTokens}, ignore_eos (streaming: ${o.maxTokens} text chunks + a usage chunk). Every`,
    `response is checked (2xx, complete body, ${o.maxTokens} completion tokens); anything else is counted as an error.`,
    `Load: closed loop (a connection sends its next request when the previous response has fully arrived); ${o.durationSeconds} s`,
    `per level at ${o.connections.join(", ")} connections (headline: ${o.moderateConnections}), after ${o.warmupSeconds} s of warm-up per target and mode`,
    `at ${o.connections[o.connections.length - 1]} connections (not counted); ${o.rounds} round(s), targets taking turns within each level in`,
    `alternating order (forward, reversed, …); figures are medians over rounds; leftover calls drain between runs.`,
    `Targets:`,
    ...targetLines.map((line) => `  ${line}`),
    ...notes,
  ].join("\n");
}

export function formatProxyTable(report: ProxyBenchReport): string {
  const { rows, edgeOnly } = summariseProxyReport(report);
  const c = report.options.moderateConnections;
  const hasOne = report.options.connections.includes(1);
  const header = [
    "mode",
    "target",
    `req/s@${c}`,
    `p50 ms`,
    `p99 ms`,
    "+p50 vs a",
    "+p99 vs a",
    ...(hasOne ? ["p50@1", "+p50@1", "(rounds)"] : []),
    "max req/s",
    "@conns",
    "cpu µs/call",
    "gc µs/call",
    "full gc/10k",
    "non-2xx",
    "errors",
    "bad body",
  ];
  const body = rows.map((row) => [
    row.mode,
    row.label,
    num(row.rps, 0),
    num(row.p50Ms, 2),
    num(row.p99Ms, 2),
    signed(row.addedP50Ms),
    signed(row.addedP99Ms),
    ...(hasOne
      ? [num(row.p50AtOneMs, 2), signed(row.addedP50AtOneMs), row.addedP50AtOneRangeMs ? row.addedP50AtOneRangeMs.map(signed).join("..") : "—"]
      : []),
    num(row.maxRps, 0),
    String(row.maxRpsConnections),
    num(row.cpuUsPerCall, 0),
    num(row.gcUsPerCall, 0),
    num(row.fullGcsPer10k, 0),
    String(row.failures.non2xx),
    String(row.failures.errors),
    String(row.failures.mismatches),
  ]);
  const edgeRows = edgeOnly.map((row) => {
    const cells = header.map(() => "");
    cells[0] = row.mode;
    cells[1] = "edge alone (d − b)";
    cells[5] = signed(row.addedP50Ms);
    cells[6] = signed(row.addedP99Ms);
    if (hasOne) cells[8] = signed(row.addedP50AtOneMs);
    return cells;
  });
  const table = alignTable(header, [...body, ...edgeRows], 2);
  const legend =
    `Medians over ${report.options.rounds} round(s). req/s, p50 and p99 at ${c} connections; "+… vs a": latency added over the bare engine at the same` +
    ` concurrency (median of each round's difference)` +
    (hasOne ? `; p50@1: one connection (per-call cost without queueing); (rounds): lowest..highest of the rounds' +p50@1` : "") +
    `; max req/s: best median rate over ${report.options.connections.join("/")} connections` +
    `; cpu µs/call: CPU time of the target's own process (the engine's for (a), not the engine's for a proxy) per response over its measured runs` +
    `; gc µs/call: that process's garbage-collection pauses on its main thread per response, and full gc/10k its full (mark-compact) collections per 10,000 responses, over the same runs (— where not metered: Portkey, the edge).`;
  const thin = report.runs
    .filter((r) => r.phase === "measure" && r.figures.responses > 0 && r.figures.responses < THIN_RUN_RESPONSES)
    .map((r) => `${TARGET_LABELS[r.target]} ${r.mode} @${r.figures.connections}: ${r.figures.responses}`);
  const thinNote = thin.length
    ? `\nRuns with fewer than ${THIN_RUN_RESPONSES} completed responses (their percentiles are rough; raise --duration): ${thin.join("; ")}.`
    : "";
  return `${table}\n\n${legend}${thinNote}`;
}
