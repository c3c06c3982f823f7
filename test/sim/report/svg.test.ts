import { describe, expect, it } from "vitest";
import { barChart, escapeXml, formatTick, lineChart } from "../../../src/sim/report/svg.js";
import { markupProblems } from "./markup.js";

describe("lineChart", () => {
  const svg = lineChart({
    id: "t",
    title: "Latency <vs> load & more",
    x: { label: "rate", scale: "log" },
    y: { label: "ms/token", scale: "log" },
    series: [
      { name: "fcfs-rr", color: "#777", markers: true, points: [{ x: 0.5, y: 10 }, { x: 1, y: 20 }, { x: 2, y: 400 }] },
      { name: "agentix", color: "#d00", emphasis: true, points: [{ x: 0.5, y: 9 }, { x: 1, y: 0 }, { x: 2, y: Number.NaN }, { x: 4, y: 30 }] },
    ],
    guides: [{ axis: "y", value: 50, label: "SLO 50" }],
  });

  it("is well-formed, standalone SVG", () => {
    expect(markupProblems(svg)).toEqual([]);
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg).not.toMatch(/NaN|Infinity|undefined/);
  });

  it("draws one path per series and names each in the legend", () => {
    expect(svg.match(/<path /g)).toHaveLength(2);
    expect(svg).toContain('data-series="fcfs-rr"');
    expect(svg).toContain(">agentix</text>");
    expect(svg).toContain("Latency &lt;vs&gt; load &amp; more");
    expect(svg).toContain("SLO 50");
  });

  it("drops points a log axis cannot show", () => {
    const agentix = svg.match(/<path d="([^"]*)"[^>]*data-series="agentix"/)?.[1] ?? "";
    // 0 and NaN dropped: two vertices remain.
    expect(agentix.match(/[ML]/g)).toHaveLength(2);
  });

  it("puts decade ticks on log axes, smaller values lower on the y axis", () => {
    expect(svg).toContain(">100</text>");
    expect(svg).toContain(">10</text>");
    const y = (label: string) => Number(svg.match(new RegExp(`y="([\\d.]+)"[^>]*text-anchor="end">${label}</text>`))?.[1]);
    expect(y("10")).toBeGreaterThan(y("100"));
  });

  it("step series draw a staircase", () => {
    const step = lineChart({ id: "s", title: "cdf", x: { label: "x", scale: "linear" }, y: { label: "y", scale: "linear", min: 0, max: 1 }, series: [{ name: "a", color: "#000", step: true, points: [{ x: 1, y: 0 }, { x: 2, y: 0.5 }, { x: 3, y: 1 }] }] });
    expect(step).toMatch(/d="M[\d.,]+H[\d.]+V[\d.]+H[\d.]+V[\d.]+"/);
    expect(markupProblems(step)).toEqual([]);
  });

  it("copes with no data", () => {
    const empty = lineChart({ id: "e", title: "empty", x: { label: "x", scale: "log" }, y: { label: "y", scale: "log" }, series: [{ name: "a", color: "#000", points: [] }] });
    expect(markupProblems(empty)).toEqual([]);
    expect(empty).not.toMatch(/NaN|Infinity/);
  });
});

describe("barChart", () => {
  it("draws a bar per value and a note for a missing one", () => {
    const svg = barChart({
      title: "makespan",
      valueLabel: "s",
      bars: [
        { label: "fcfs-rr", value: 120, color: "#777" },
        { label: "agentix", value: 80.5, color: "#d00" },
        { label: "oracle", value: null, color: "#000", note: "3 unfinished" },
      ],
    });
    expect(markupProblems(svg)).toEqual([]);
    expect(svg.match(/<rect [^>]*data-bar=/g)).toHaveLength(2);
    expect(svg).toContain("3 unfinished");
    const width = (label: string) => Number(svg.match(new RegExp(`width="([\\d.]+)"[^>]*data-bar="${label}"`))?.[1]);
    expect(width("fcfs-rr") / width("agentix")).toBeCloseTo(120 / 80.5, 1);
  });
});

describe("helpers", () => {
  it("escapeXml", () => {
    expect(escapeXml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });
  it("formatTick", () => {
    expect(formatTick(0)).toBe("0");
    expect(formatTick(0.05)).toBe("0.05");
    expect(formatTick(0.125)).toBe("0.13");
    expect(formatTick(2)).toBe("2");
    expect(formatTick(250)).toBe("250");
    expect(formatTick(5000)).toBe("5000");
    expect(formatTick(20000)).toBe("20k");
    expect(formatTick(3e6)).toBe("3M");
  });
});
