import type { BenchReport } from "./bench-report.js";
import { percent, seconds, sig3 } from "./format.js";
import { EMPHASISED_POLICY, policyColors } from "./palette.js";
import { barChart, escapeXml, lineChart, type Series } from "./svg.js";
import { curveTable, engagementTable, equalLatencyTable, goalsTable, groupTable, type HeadlineTable, headlineTable } from "./table.js";

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

function tableHtml(table: HeadlineTable, colors: Map<string, string>, policyColumn: number): string {
  // Non-breaking hyphens: a header may wrap at its spaces, never inside "fcfs-rr".
  const head = `<tr>${table.headers.map((h) => `<th>${cell(h).replaceAll("-", "\u2011")}</th>`).join("")}</tr>`;
  const body = table.rows
    .map((row) => {
      const policy = row[policyColumn] ?? "";
      const cls = policy === EMPHASISED_POLICY ? ' class="emphasis"' : "";
      const swatch = colors.has(policy) ? `<span class="swatch" style="background:${colors.get(policy) ?? "#000"}"></span>` : "";
      return `<tr${cls}>${row.map((c, i) => `<td>${i === policyColumn ? swatch : ""}${cell(c)}</td>`).join("")}</tr>`;
    })
    .join("\n");
  const title = table.title === undefined ? "" : `<p class="meta">${cell(table.title)}</p>\n`;
  const notes = (table.footnotes ?? []).length === 0 ? "" : `\n<ol class="meta">${(table.footnotes ?? []).map((n) => `<li>${cell(n)}</li>`).join("")}</ol>`;
  return `${title}<div class="scroll"><table>\n${head}\n${body}\n</table></div>${notes}`;
}

function latencyVsRate(report: BenchReport, colors: Map<string, string>, pick: "mean" | "p99"): string {
  const series: Series[] = report.config.policies.map((policy) => ({
    name: policy,
    color: colors.get(policy) ?? "#000",
    markers: true,
    emphasis: policy === EMPHASISED_POLICY,
    points: (report.sweep[policy] ?? []).flatMap((p) => {
      const o = p.metrics.overall;
      const y = pick === "mean" ? o.meanMsPerToken : (o.normalizedLatencyMsPerToken?.p99 ?? null);
      return y === null ? [] : [{ x: p.ratePerSec, y, hollow: !p.metrics.stability.stable }];
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

function heldVsRate(report: BenchReport, colors: Map<string, string>): string {
  const series: Series[] = report.config.policies.map((policy) => ({
    name: policy,
    color: colors.get(policy) ?? "#000",
    markers: true,
    emphasis: policy === EMPHASISED_POLICY,
    points: (report.sweep[policy] ?? []).flatMap((p) => {
      const share = p.metrics.engagement.heldShare;
      return share === null ? [] : [{ x: p.ratePerSec, y: share * 100, hollow: !p.metrics.stability.stable }];
    }),
  }));
  return lineChart({
    id: "held",
    title: "Share of calls held in the pool queue vs arrival rate",
    x: { label: "arrival rate (programs/s)", scale: "log" },
    y: { label: "% of calls held > 1 ms", scale: "linear", min: 0 },
    series,
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
    y: { label: "fraction of measured programs", scale: "linear", min: 0, max: 1 },
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
  const headers = ["rate prog/s", "stable", "measured finished", "mean ms/tok", "P95", "P99", "mean completion", "in prog/s", "out prog/s", "backlog first→last third", "cache hit", "held", "preempt", "engine busy", "capacity", "sim wall", "why unstable"];
  return report.config.policies
    .map((policy) => {
      const rows = (report.sweep[policy] ?? []).map((p) => {
        const m = p.metrics;
        const l = m.overall.normalizedLatencyMsPerToken;
        const b = m.stability.backlog;
        return [
          sig3(p.ratePerSec),
          m.stability.stable ? "yes" : "no",
          `${m.overall.finished}/${m.overall.programs}`,
          `${m.overall.meanIsLowerBound ? "≥" : ""}${sig3(m.overall.meanMsPerToken)}`,
          sig3(l?.p95),
          sig3(l?.p99),
          seconds(m.overall.completionMs?.mean),
          sig3(m.arrivalsPerSec),
          sig3(m.completionsPerSec),
          b === null ? "-" : `${sig3(b.firstThirdMean)} → ${sig3(b.lastThirdMean)}`,
          percent(m.cacheHitRate),
          percent(m.engagement.heldShare),
          String(m.engagement.preemptions),
          percent(m.engagement.busyShare),
          sig3(m.capacityPerSec),
          seconds(m.wallMs),
          m.stability.reasons.join("; "),
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
    ["regime", c.regime ?? "none"],
    ["workload", `${c.workloadName} (${c.workload})`],
    ["programs per run", `${c.programsPerRun} (warm-up ${percent(c.window.warmupFraction)}, cool-down ${percent(c.window.cooldownFraction)})`],
    ["engines", `${c.engines} × ${c.engineProfile}`],
    ["pool buffer per engine", `${c.maxInFlightPerEngine} calls in flight (queueing policies; fcfs-rr and fcfs-least-loaded send everything at once)`],
    ["tool / think time", c.gapScale === 1 ? "as generated" : `× ${c.gapScale}`],
    ["plan weights", Object.keys(c.planWeights).length === 0 ? "equal (the workload's tenant weights are traffic shares)" : Object.entries(c.planWeights).map(([t, w]) => `${t} ${w}`).join(", ")],
    ["seed", String(c.seed)],
    ["arrival rates (programs/s)", `${c.rates.map(sig3).join(", ")} (${c.ratesSource})`],
    ["capacity estimate", c.capacity === null ? "-" : `${sig3(c.capacity.perSec)} programs/s: ${c.capacity.source}`],
    ["drain cap", `max(${c.drain.windows} × the window, ${seconds(c.drain.minMs)}) after the window`],
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

function paperHtml(report: BenchReport): string {
  const p = report.paper;
  if (p === null) return "";
  return `<h2>Against the paper</h2>\n<p><b>Paper:</b> ${cell(p.paper)}<br><b>Ours:</b> ${cell(p.ours)}</p>\n<ul>${p.explanation.map((e) => `<li>${cell(e)}</li>`).join("")}</ul>`;
}

export function renderHtmlReport(report: BenchReport): string {
  const colors = policyColors(report.config.policies);
  const title = `Agentix scheduling benchmark — ${report.config.regime === null ? report.config.workloadName : `regime ${report.config.regime} (${report.config.workloadName})`}`;
  const table = (t: HeadlineTable, policyColumn = 0) => tableHtml(t, colors, policyColumn);
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
<p class="meta">Discrete-event simulation at steady state · ${cell(report.createdAt)} · <code>${cell(report.config.command)}</code></p>

<h2>Headline</h2>
<p>The highest arrival rate each policy sustains at steady state (stable, mean normalised latency under the SLO), and its ratio to ${report.references.map((r) => `<b>${cell(r)}</b>`).join(" and ")}: throughput at equal mean normalised latency.</p>
${table(headlineTable(report))}
${report.notes.map((note) => `<p class="note">${cell(note)}</p>`).join("\n")}
${report.goals.length > 0 ? `<h2>Goals</h2>\n${table(goalsTable(report), -1)}` : ""}
${paperHtml(report)}

<h2>Throughput and latency</h2>
<figure>${latencyVsRate(report, colors, "mean")}
<figcaption>Autellix's figure: x = arrival rate, y = mean normalised latency (a program's response time ÷ the tokens it generated on all threads) of the measured programs. Open markers: the rate was not stable (backlog or latency grew across the window, or measured programs did not finish); their mean counts unfinished programs at a lower bound. The dashed line is the SLO; where a curve last crosses it while stable is that policy's sustained rate.</figcaption></figure>
<figure>${latencyVsRate(report, colors, "p99")}
<figcaption>The same runs, P99 over finished measured programs: the tail a program-aware scheduler must not sacrifice.</figcaption></figure>
${table(curveTable(report, "mean"))}
${table(equalLatencyTable(report))}

<h2>Was ordering engaged?</h2>
<figure>${heldVsRate(report, colors)}
<figcaption>Program-level ordering decides only for calls the pool holds back; a policy that never holds a call orders nothing.</figcaption></figure>
${table(engagementTable(report))}
${table(curveTable(report, "held"))}

<h2>By program kind and by tenant</h2>
${table(groupTable(report, "kind"), 1)}
${report.byTenant.length > 1 ? table(groupTable(report, "tenant"), 1) : `<p class="meta">One tenant only.</p>`}

<h2>Latency distribution at one load</h2>
<figure>${cdfChart(report, colors)}
<figcaption>Empirical CDF of the measured programs' normalised latency at ${cell(sig3(report.cdf.ratePerSec))} programs/s (${cell(report.compareAt.why)}).</figcaption></figure>
${report.batch.length > 0 ? `<h2>Offline batch</h2>\n<figure>${makespanChart(report, colors)}\n<figcaption>Every program arrives at t = 0; makespan = when the last one finishes (lower is better).</figcaption></figure>` : ""}

<h2>Configuration</h2>
${configList(report)}

<h2>Per-rate details</h2>
${sweepDetails(report)}

<h2>Policies</h2>
${policyList(report, colors)}

<h2>Definitions</h2>
<dl>
<dt>steady state</dt><dd>Each run's programs arrive as one Poisson stream: the first share warms the system up, the last share keeps the load on while the measured ones finish; only the measured programs (arriving inside the window) count.</dd>
<dt>stable</dt><dd>Across the window, the backlog (programs in the system beyond those the same arrivals would leave there if each ran alone, for its unloaded duration) and the calls waiting (pool queue + engines' own queues) grow (least-squares slope × window) by less than ${percent(report.config.stability.maxGrowthShare)} of the window's arrivals, the median slowdown (completion ÷ unloaded duration) of its last third's measured programs is under ${report.config.stability.maxLatencyGrowth}× its first third's, every measured program finished, and the window lasts at least ${report.config.stability.minWindowDurations}× the measured programs' median unloaded duration (a shorter one is a burst). An unstable rate is not sustained whatever its mean.</dd>
<dt>normalised latency</dt><dd>(finish − arrival) ÷ generated tokens of the whole program, ms per token; mean, P95 and P99 (nearest rank) over measured programs.</dd>
<dt>held</dt><dd>Share of the calls issued in the window that waited in the pool queue more than 1 ms; hold = dispatch − ready.</dd>
<dt>batch, KV</dt><dd>Per engine, time-weighted over its steps inside the window (KV: fraction of blocks referenced when a step starts; idle time counts as 0), then averaged over engines; max = the highest of any step.</dd>
<dt>capacity</dt><dd>Programs finished inside the window ÷ the engines' mean busy share there: what they would complete if never idle, at this run's batching.</dd>
<dt>longest-10% P99</dt><dd>P99 completion time of the 10 % of measured programs with the most prompt + generated tokens (the same programs for every policy): the starvation indicator. An unfinished program counts at its lower bound, shown with ≥.</dd>
<dt>cache hit</dt><dd>cached ÷ prompt tokens of the calls that finished in the window.</dd>
</dl>
</body>
</html>
`;
}
