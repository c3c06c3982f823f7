import { describe, expect, it } from "vitest";
import { renderHtmlReport } from "../../../src/sim/report/html.js";
import { curveTable, engagementTable, formatTextTable, goalsTable, groupTable, headlineTable, tablePreamble } from "../../../src/sim/report/table.js";
import { sampleReport } from "./fixtures.js";
import { markupProblems } from "./markup.js";

const POLICIES = ["fcfs-rr", "request-mlq", "plas", "atlas", "agentix"];

describe("renderHtmlReport", () => {
  const html = renderHtmlReport(sampleReport(POLICIES));

  it("is well-formed markup", () => {
    expect(html.startsWith("<!doctype html>")).toBe(true);
    expect(markupProblems(html)).toEqual([]);
    expect(html).not.toMatch(/NaN|undefined|\[object/);
  });

  it("is self-contained: no script, stylesheet link, or fetched resource", () => {
    expect(html).not.toMatch(/<script|<link|<img|<iframe|@import|url\((?!#)/i);
    expect(html).not.toMatch(/\s(src|href)=/i);
    // The only URL is the SVG namespace.
    const urls = new Set(html.match(/https?:\/\/[^\s"']+/g) ?? []);
    expect([...urls]).toEqual(["http://www.w3.org/2000/svg"]);
  });

  it("has the charts, each as inline SVG: the throughput-latency curves, held share, CDF and the batch", () => {
    expect(html.match(/<svg /g)).toHaveLength(5);
    expect(html).toContain("Mean normalised latency vs arrival rate");
    expect(html).toContain("P99 normalised latency vs arrival rate");
    expect(html).toContain("Share of calls held in the pool queue vs arrival rate");
    expect(html).toContain("Normalised latency CDF at 1 programs/s");
    expect(html).toContain("Offline batch: makespan of 20 programs");
  });

  it("draws unstable rates as open markers", () => {
    const mean = html.match(/<svg [^>]*aria-label="Mean normalised latency vs arrival rate"[\s\S]*?<\/svg>/)?.[0] ?? "";
    // Every policy is unstable at its top rate (2 prog/s) in the fixture.
    expect(mean.match(/fill="#fff" stroke=/g)).toHaveLength(POLICIES.length);
  });

  it("has the engagement, per-kind and per-tenant tables", () => {
    expect(html).toContain("Was ordering engaged?");
    expect(html).toContain("Per kind:");
    expect(html).toContain("Per tenant:");
    expect(html).toContain("ten_b");
  });

  it("shows every policy in the table and in every chart", () => {
    const svgs = html.match(/<svg [\s\S]*?<\/svg>/g) ?? [];
    for (const policy of POLICIES) {
      expect(html).toContain(`</span>${policy}</td>`);
      for (const svg of svgs) expect(svg, policy).toContain(`>${policy}</text>`);
    }
  });

  it("escapes text from the workload and the notes", () => {
    expect(html).toContain("mixed &lt;&amp;&gt; test");
    expect(html).not.toContain("mixed <&> test");
    expect(html).toContain('<p class="note">a caveat &lt;with markup&gt;</p>');
  });

  it("states the SLO", () => {
    expect(html).toContain("mean normalised latency ≤ 40 ms/token (given with --slo-ms-per-token)");
  });
});

describe("headline table", () => {
  const report = sampleReport(["fcfs-rr", "agentix"]);
  it("one row per policy with the per-load figures and whether the queue held calls", () => {
    const table = headlineTable(report);
    expect(table.rows.map((r) => r[0])).toEqual(["fcfs-rr", "agentix"]);
    expect(table.headers).toContain("× fcfs-rr");
    expect(table.headers).toContain("held");
    const [fcfs, agentix] = table.rows as [string[], string[]];
    expect(fcfs[1]).toBe("1");
    expect(agentix[2]).toBe("1.10×");
    const held = table.headers.indexOf("held");
    expect(fcfs[held]).toBe("0.0 %");
    expect(agentix[held]).toBe("100.0 %");
  });

  it("aligns columns", () => {
    const text = formatTextTable(headlineTable(report));
    const lines = text.trimEnd().split("\n");
    // Title, header, rule, two rows.
    expect(lines).toHaveLength(5);
    expect(lines[2]).toMatch(/^─+(\s+─+)+$/);
    // Every right-aligned numeric column ends at the same offset as its header.
    const headerEnd = (lines[1] as string).indexOf("sustained prog/s") + "sustained prog/s".length;
    expect((lines[3] as string).slice(0, headerEnd)).toMatch(/ 1$/);
    expect((lines[4] as string).slice(0, headerEnd)).toMatch(/ 1\.1$/);
  });

  it("a preamble that states the SLO, the steady-state rule and the notes", () => {
    const text = tablePreamble(report);
    expect(text).toContain("SLO: mean normalised latency ≤ 40 ms/token");
    expect(text).toContain("warm-up 20.0 % and cool-down 20.0 % of the programs excluded");
    expect(text).toContain("NOTE: a caveat <with markup>");
    expect(text).toContain("pool buffer 4/engine · tool time ×1");
    expect(text).toContain("equal plan weights");
  });
});

describe("the other tables", () => {
  const report = sampleReport(["fcfs-rr", "agentix"]);
  it("the curve marks unstable rates and over-SLO means", () => {
    const curve = curveTable(report, "mean");
    expect(curve.headers).toEqual(["prog/s", "fcfs-rr", "agentix"]);
    expect(curve.rows.at(-1)?.[1]).toMatch(/\*/);
    expect(curve.rows[0]?.[1]).not.toMatch(/\*/);
  });

  it("engagement: each policy at its highest sustained rate", () => {
    const t = engagementTable(report);
    expect(t.rows.map((r) => r.slice(0, 3))).toEqual([
      ["fcfs-rr", "1", "0.0 %"],
      ["agentix", "1", "100.0 %"],
    ]);
  });

  it("per kind and per tenant: one row per group and policy", () => {
    expect(groupTable(report, "kind").rows.map((r) => `${r[0]}/${r[1]}`)).toEqual(["chat/fcfs-rr", "chat/agentix", "tree-search/fcfs-rr", "tree-search/agentix"]);
    expect(groupTable(report, "tenant").rows).toHaveLength(4);
  });

  it("goals with their status", () => {
    const withGoals = {
      ...report,
      goals: [
        { goal: "g", target: "≥ 2×", measured: "1.10×", status: "MISS" as const, note: "why" },
        { goal: "h", target: "≥ 1×", measured: "1.10×", status: "PASS" as const, note: null },
      ],
    };
    expect(goalsTable(withGoals).rows).toEqual([["g", "≥ 2×", "1.10× [1]", "MISS"], ["h", "≥ 1×", "1.10×", "PASS"]]);
    expect(formatTextTable(goalsTable(withGoals))).toMatch(/\n\[1\] why\n$/);
  });
});
