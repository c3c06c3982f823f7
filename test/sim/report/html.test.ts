import { describe, expect, it } from "vitest";
import { renderHtmlReport } from "../../../src/sim/report/html.js";
import { formatTextTable, headlineTable, tablePreamble } from "../../../src/sim/report/table.js";
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

  it("has the four charts, each as inline SVG", () => {
    expect(html.match(/<svg /g)).toHaveLength(4);
    expect(html).toContain("Mean normalised latency vs arrival rate");
    expect(html).toContain("P99 normalised latency vs arrival rate");
    expect(html).toContain("Normalised latency CDF at 1 programs/s");
    expect(html).toContain("Offline batch: makespan of 20 programs");
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
  it("one row per policy with the per-load figures", () => {
    const table = headlineTable(report);
    expect(table.rows.map((r) => r[0])).toEqual(["fcfs-rr", "agentix"]);
    expect(table.headers).toContain("× fcfs-rr");
    const [fcfs, agentix] = table.rows as [string[], string[]];
    expect(fcfs[1]).toBe("1");
    expect(agentix[2]).toBe("1.10×");
    // agentix's batch makespan is null in the fixture.
    expect(agentix[9]).toMatch(/^unfinished/);
    expect(fcfs[9]).toBe("1 s");
  });

  it("aligns columns", () => {
    const text = formatTextTable(headlineTable(report));
    const lines = text.trimEnd().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(/^─+(\s+─+)+$/);
    // Every right-aligned numeric column ends at the same offset as its header.
    const headerEnd = (lines[0] as string).indexOf("sustained prog/s") + "sustained prog/s".length;
    expect((lines[2] as string).slice(0, headerEnd)).toMatch(/ 1$/);
    expect((lines[3] as string).slice(0, headerEnd)).toMatch(/ 1\.1$/);
  });

  it("a preamble that states the SLO and the load", () => {
    const text = tablePreamble(report);
    expect(text).toContain("SLO: mean normalised latency ≤ 40 ms/token");
    expect(text).toContain("per-load columns at 1 prog/s (test load)");
    expect(text).toContain("NOTE: a caveat <with markup>");
    expect(text).toContain("pool buffer 4/engine · tool time ×1");
  });
});
