import { describe, expect, it } from "vitest";
import { nearestRank, quantilePoints, summarise } from "../../../src/sim/report/distribution.js";
import { computeRunMetrics, normalizedLatencies } from "../../../src/sim/report/metrics.js";
import { engine, fourPrograms, program, result } from "./fixtures.js";

describe("computeRunMetrics on a hand-computed run", () => {
  const m = computeRunMetrics(fourPrograms());

  it("counts finished and unfinished programs", () => {
    expect(m.programs).toBe(4);
    expect(m.finished).toBe(3);
    expect(m.unfinished).toBe(1);
  });

  it("normalised latency = (finish − arrival) / generated tokens, over finished programs", () => {
    // 10, 40, 3 ms/token.
    expect(m.normalizedLatencyMsPerToken?.mean).toBeCloseTo(53 / 3, 10);
    expect(m.normalizedLatencyMsPerToken?.p50).toBe(10);
    expect(m.normalizedLatencyMsPerToken?.p95).toBe(40);
    expect(m.normalizedLatencyMsPerToken?.p99).toBe(40);
    expect(m.normalizedLatencyMsPerToken?.count).toBe(3);
    expect(normalizedLatencies(fourPrograms()).sort((a, b) => a - b)).toEqual([3, 10, 40]);
  });

  it("completion time mean and P99", () => {
    expect(m.completionMs?.mean).toBe(1200);
    expect(m.completionMs?.p99).toBe(2000);
    expect(m.completionMs?.max).toBe(2000);
  });

  it("longest 10 % by tokens includes an unfinished program at its lower bound", () => {
    expect(m.longestTenth).toEqual({ by: "prompt+generated tokens", programs: 1, unfinished: 1, completionP99Ms: 2500, completionMeanMs: 2500 });
  });

  it("longest 10 % follows the spec's work when given", () => {
    const byWork = computeRunMetrics(fourPrograms(), { workTokens: new Map([["A", 1], ["B", 2], ["C", 9_999], ["D", 3]]) });
    expect(byWork.longestTenth.unfinished).toBe(0);
    expect(byWork.longestTenth.completionP99Ms).toBe(600);
  });

  it("throughput over first arrival → end of run", () => {
    expect(m.throughput.spanMs).toBe(4000);
    expect(m.throughput.programsPerSec).toBeCloseTo(0.75, 12);
    expect(m.throughput.tokensPerSec).toBeCloseTo(90, 12);
  });

  it("prefix cache, preemptions, queueing, engine busy", () => {
    expect(m.prefixCache).toEqual({ queriedTokens: 2000, hitTokens: 800, hitRate: 0.4 });
    expect(m.preemptions).toBe(3);
    expect(m.queueMsMean).toBe(150);
    expect(m.engineBusyFraction).toBe(0.5);
    expect(m.simEndMs).toBe(4000);
    expect(m.truncated).toBe(false);
  });

  it("is JSON-safe (no NaN)", () => {
    expect(JSON.stringify(m)).not.toMatch(/NaN|Infinity/);
    expect(JSON.parse(JSON.stringify(m))).toEqual(m);
  });
});

describe("percentiles on 100 programs", () => {
  it("P50 / P95 / P99 are the nearest-rank values", () => {
    // Program i (1..100) takes i ms for 1 token: latencies 1..100 ms/token.
    const programs = Array.from({ length: 100 }, (_, k) => program({ programId: `p${String(k).padStart(3, "0")}`, arrivalMs: 0, finishMs: 100 - k, generatedTokens: 1 }));
    const m = computeRunMetrics(result(programs, [], 100));
    expect(m.normalizedLatencyMsPerToken).toMatchObject({ count: 100, mean: 50.5, p50: 50, p95: 95, p99: 99, max: 100 });
    // 10 longest by tokens: ties (all 1 token) broken by id, so p0…p9 → completion 100…91.
    expect(m.longestTenth.programs).toBe(10);
    expect(m.longestTenth.completionP99Ms).toBe(100);
    expect(m.longestTenth.completionMeanMs).toBe(95.5);
  });
});

describe("edge cases", () => {
  it("nothing finished: latency figures are null, not NaN", () => {
    const m = computeRunMetrics(result([program({ programId: "x", arrivalMs: 0, finishMs: Number.NaN })], [engine({ engineId: "e" })], 10));
    expect(m.normalizedLatencyMsPerToken).toBeNull();
    expect(m.completionMs).toBeNull();
    expect(m.queueMsMean).toBeNull();
    expect(m.prefixCache.hitRate).toBeNull();
    expect(m.unfinished).toBe(1);
    expect(m.throughput.programsPerSec).toBe(0);
  });

  it("an empty run", () => {
    const m = computeRunMetrics(result([], [], 0));
    expect(m.programs).toBe(0);
    expect(m.longestTenth.programs).toBe(0);
    expect(m.longestTenth.completionP99Ms).toBeNull();
    expect(m.throughput).toEqual({ spanMs: 0, programsPerSec: 0, tokensPerSec: 0 });
    expect(m.engineBusyFraction).toBeNull();
  });
});

describe("distribution helpers", () => {
  it("nearestRank", () => {
    const sorted = [1, 2, 3, 4];
    expect(nearestRank(sorted, 0)).toBe(1);
    expect(nearestRank(sorted, 0.25)).toBe(1);
    expect(nearestRank(sorted, 0.26)).toBe(2);
    expect(nearestRank(sorted, 1)).toBe(4);
    expect(nearestRank([], 0.5)).toBeNaN();
  });

  it("summarise and quantilePoints", () => {
    expect(summarise([])).toBeNull();
    expect(summarise([5, 1, 3])).toEqual({ count: 3, mean: 3, p50: 3, p95: 5, p99: 5, max: 5 });
    expect(quantilePoints([4, 1, 3, 2], 3)).toEqual([
      { q: 0, value: 1 },
      { q: 0.5, value: 2 },
      { q: 1, value: 4 },
    ]);
  });
});
