import type { BenchReport } from "./bench-report.js";
import { percent, seconds, sig3 } from "./format.js";
import { EMPHASISED_POLICY, policyColors } from "./palette.js";
import { barChart, escapeXml, lineChart, type Series } from "./svg.js";
import { headlineTable } from "./table.js";

/*
 * The benchmark's HTML report: one self-contained file (inline CSS and SVG, no
 * script, nothing fetched), readable offline and attachable to an issue.
 */

const STYLE = `
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #111; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.2rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #555; font-size: .9rem; }
code { background: #f4f4f4; padding: .05rem .3rem; border-radius: 3px; font-size: .85rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .6rem 0; }
th, td { padding: .3rem .55rem; border-bottom: 1px solid #e5e5e5; text-align: right; white-space: nowrap; }
th { background: #fafafa; font-weight: 600; white-space: normal; vertical-align: bottom; }
.scroll { overflow-x: auto; }
.note { background: #fff6e0; border-left: 4px solid #e0a000; padding: .5rem .8rem; font-size: .9rem; }
td:first-child, th:first-child { text-align: left; }
tr.emphasis td { font-weight: 600; }
.swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .4rem; vertical-align: -1px; }
figure { margin: 1.2rem 0; }
figcaption { color: #444; font-size: .85rem; max-width: 900px; }
svg { max-width: 100%; height: auto; }
details { margin: .6rem 0; }
summary { cursor: pointer; }
dl { font-size: .9rem; } dt { font-weight: 600; margin-top: .5rem; } dd { margin-left: 1rem; }
`;

function cell(text: string): string {
  return escapeXml(text);
}

function headlineHtml(report: BenchReport, colors: Map<string, string>): string {
  const table = headlineTable(report);
  // Non-breaking hyphens: a header may wrap at its spaces, never inside "fcfs-rr".
  const head = `<tr>${table.headers.map((h) => `<th>${cell(h).replaceAll("-", "\u2011")}</th>`).join("")}</tr>`;
  const body = table.rows
    .map((row) => {
      const policy = row[0] ?? "";
      const cls = policy === EMPHASISED_POLICY ? ' class="emphasis"' : "";
      const swatch = `<span class="swatch" style="background:${colors.get(policy) ?? "#000"}"></span>`;
      return `<tr${cls}>${row.map((c, i) => `<td>${i === 0 ? swatch : ""}${cell(c)}</td>`).join("")}</tr>`;
    })
    .join("\n");
  return `<div class="scroll"><table>\n${head}\n${body}\n</table></div>`;
}

function latencyVsRate(report: BenchReport, colors: Map<string, string>, pick: "mean" | "p99"): string {
  const series: Series[] = report.config.policies.map((policy) => ({
    name: policy,
    color: colors.get(policy) ?? "#000",
    markers: true,
    emphasis: policy === EMPHASISED_POLICY,
    points: (report.sweep[policy] ?? []).flatMap((p) => {
      const latency = p.metrics.normalizedLatencyMsPerToken;
      return latency === null ? [] : [{ x: p.ratePerSec, y: latency[pick] }];
    }),
  }));
  return lineChart({
    id: `latency-${pick}`,
    title: `${pick === "mean" ? "Mean" : "P99"} normalised latency vs arrival rate`,
    x: { label: "arrival rate (programs/s)", scale: "log" },
    y: { label: "ms per generated token", scale: "log" },
    series,
    guides: pick === "mean" ? [{ axis: "y", value: report.slo.msPerToken, label: `SLO ${sig3(report.slo.msPerToken)} ms/token` }] : [],
  });
}

function cdfChart(report: BenchReport, colors: Map<string, string>): string {
  const series: Series[] = report.cdf.series.map((s) => ({
    name: s.policy,
    color: colors.get(s.policy) ?? "#000",
    step: true,
    emphasis: s.policy === EMPHASISED_POLICY,
    points: s.quantiles.map((q) => ({ x: q.value, y: q.q })),
  }));
  return lineChart({
    id: "cdf",
    title: `Normalised latency CDF at ${sig3(report.cdf.ratePerSec)} programs/s`,
    x: { label: "ms per generated token", scale: "log" },
    y: { label: "fraction of finished programs", scale: "linear", min: 0, max: 1 },
    series,
  });
}

function makespanChart(report: BenchReport, colors: Map<string, string>): string {
  return barChart({
    title: `Offline batch: makespan of ${report.config.programsPerRun} programs arriving at t = 0`,
    valueLabel: "makespan (s)",
    bars: report.batch.map((b) => ({
      label: b.policy,
      value: b.makespanMs === null ? null : b.makespanMs / 1_000,
      color: colors.get(b.policy) ?? "#000",
      ...(b.makespanMs === null ? { note: `${b.metrics.unfinished} programs unfinished at ${seconds(b.metrics.simEndMs)}` } : {}),
    })),
  });
}

function sweepDetails(report: BenchReport): string {
  const headers = ["rate prog/s", "finished", "mean ms/tok", "P95", "P99", "mean completion", "P99 completion", "longest-10% P99", "prog/s out", "tok/s", "cache hit", "preempt", "engine busy", "sim wall"];
  return report.config.policies
    .map((policy) => {
      const rows = (report.sweep[policy] ?? []).map((p) => {
        const m = p.metrics;
        const l = m.normalizedLatencyMsPerToken;
        return [
          sig3(p.ratePerSec),
          `${m.finished}/${m.programs}`,
          sig3(l?.mean),
          sig3(l?.p95),
          sig3(l?.p99),
          seconds(m.completionMs?.mean),
          seconds(m.completionMs?.p99),
          `${m.longestTenth.unfinished > 0 ? "≥" : ""}${seconds(m.longestTenth.completionP99Ms)}`,
          sig3(m.throughput.programsPerSec),
          sig3(m.throughput.tokensPerSec),
          percent(m.prefixCache.hitRate),
          String(m.preemptions),
          percent(m.engineBusyFraction),
          seconds(m.wallMs),
        ];
      });
      const body = rows.map((r) => `<tr>${r.map((c) => `<td>${cell(c)}</td>`).join("")}</tr>`).join("\n");
      return `<details><summary>${cell(policy)}</summary><table><tr>${headers.map((h) => `<th>${cell(h)}</th>`).join("")}</tr>\n${body}</table></details>`;
    })
    .join("\n");
}

function configList(report: BenchReport): string {
  const c = report.config;
  const items: [string, string][] = [
    ["workload", `${c.workloadName} (${c.workload})`],
    ["programs per run", String(c.programsPerRun)],
    ["engines", `${c.engines} × ${c.engineProfile}`],
    ["pool buffer per engine", `${c.maxInFlightPerEngine} calls in flight (queueing policies; fcfs-rr and fcfs-least-loaded send everything at once)`],
    ["tool / think time", c.gapScale === 1 ? "as generated" : `× ${c.gapScale}`],
    ["seed", String(c.seed)],
    ["arrival rates (programs/s)", `${c.rates.map(sig3).join(", ")} (${c.ratesSource === "user" ? "given" : `geometric ladder around a capacity estimate of ${sig3(c.capacityEstimatePerSec)} programs/s: finished programs ÷ busy time per engine in the baseline's batch run`})`],
    ["simulated-time cap per run", seconds(c.maxSimMs)],
    ["baseline", report.baseline],
    ["SLO", `mean normalised latency ≤ ${sig3(report.slo.msPerToken)} ms/token (${report.slo.explanation})`],
    ["wall time", seconds(report.wallMs)],
  ];
  return `<table>${items.map(([k, v]) => `<tr><td>${cell(k)}</td><td style="text-align:left;white-space:normal">${cell(v)}</td></tr>`).join("")}</table>`;
}

function policyList(report: BenchReport, colors: Map<string, string>): string {
  return `<dl>${report.policies
    .map((p) => `<dt><span class="swatch" style="background:${colors.get(p.name) ?? "#000"}"></span>${cell(p.name)} — ${cell(p.label)}</dt><dd>${cell(p.description)}</dd>`)
    .join("")}</dl>`;
}

export function renderHtmlReport(report: BenchReport): string {
  const colors = policyColors(report.config.policies);
  const title = `Agentix scheduling benchmark — ${report.config.workloadName}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${cell(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${cell(title)}</h1>
<p class="meta">Discrete-event simulation · ${cell(report.createdAt)} · <code>${cell(report.config.command)}</code></p>

<h2>Headline</h2>
<p>The highest arrival rate each policy sustains while its mean normalised latency stays under the SLO, and the ratio to <b>${cell(report.baseline)}</b>. Per-load columns are at ${cell(sig3(report.cdf.ratePerSec))} programs/s (${cell(report.cdf.why)}).</p>
${headlineHtml(report, colors)}
${report.notes.map((note) => `<p class="note">${cell(note)}</p>`).join("\n")}

<h2>Latency under load</h2>
<figure>${latencyVsRate(report, colors, "mean")}
<figcaption>Normalised latency = a program's response time (finish − arrival) ÷ the tokens it generated on all threads (Autellix's metric), averaged over finished programs. The dashed line is the SLO; where a policy's curve crosses it is its sustained rate.${report.config.ratesSource === "capacity-estimate" ? " Every policy ran the baseline's rates; a policy still under the SLO there ran higher rates too, so curves end at different loads." : ""}</figcaption></figure>
<figure>${latencyVsRate(report, colors, "p99")}
<figcaption>The same runs, P99 over programs: the tail a program-aware scheduler must not sacrifice.</figcaption></figure>

<h2>Latency distribution at one load</h2>
<figure>${cdfChart(report, colors)}
<figcaption>Empirical CDF of per-program normalised latency at ${cell(sig3(report.cdf.ratePerSec))} programs/s (${cell(report.cdf.why)}).</figcaption></figure>

<h2>Offline batch</h2>
<figure>${makespanChart(report, colors)}
<figcaption>Every program arrives at t = 0; makespan = when the last one finishes (lower is better).</figcaption></figure>

<h2>Configuration</h2>
${configList(report)}

<h2>Per-rate details</h2>
${sweepDetails(report)}

<h2>Policies</h2>
${policyList(report, colors)}

<h2>Definitions</h2>
<dl>
<dt>normalised latency</dt><dd>(finish − arrival) ÷ generated tokens of the whole program, ms per token; mean, P95 and P99 (nearest rank) over finished programs.</dd>
<dt>longest-10% P99</dt><dd>P99 completion time of the 10 % of programs with the most prompt + generated tokens (the same programs for every policy): the starvation indicator. An unfinished program counts at its lower bound (end of run − arrival), shown with ≥.</dd>
<dt>cache hit</dt><dd>prefix-cache hit tokens ÷ queried tokens over all engines.</dd>
<dt>throughput</dt><dd>finished programs and generated tokens per second, from the first arrival to the end of the simulation.</dd>
</dl>
</body>
</html>
`;
}
