import { describe, expect, it } from "vitest";
import type { RunSample } from "../../../src/sim/des/observer.js";
import type { CallRecord } from "../../../src/sim/des/simulate.js";
import { assessStability, computeSteadyState, programWindow, type SteadyStateRun, trend } from "../../../src/sim/report/steady-state.js";
import { engine, program } from "./fixtures.js";

/* Steady-state figures: the window, the stability test, engagement and the per-group split. */

const flatPrng = (seed: number) => {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
};

function samples(startMs: number, endMs: number, n: number, value: (t: number, i: number) => number, waiting: (t: number) => number = () => 0): RunSample[] {
  return Array.from({ length: n + 1 }, (_, i) => {
    const atMs = startMs + ((endMs - startMs) * i) / n;
    return { atMs, programsInSystem: value(atMs, i), poolQueued: waiting(atMs), engineRunning: 0, engineWaiting: 0, kvUsage: 0 };
  });
}

describe("programWindow", () => {
  const programs = Array.from({ length: 10 }, (_, i) => ({ programId: `p${i}`, arrivalMs: i * 100 }));

  it("excludes the warm-up and the cool-down programs; the window is the measured arrivals' span", () => {
    const w = programWindow(programs, { warmupFraction: 0.2, cooldownFraction: 0.3 });
    expect(w).toMatchObject({ warmup: 2, measured: 5, cooldown: 3, startMs: 200, endMs: 700 });
    expect(w.measuredIds).toEqual(["p2", "p3", "p4", "p5", "p6"]);
    // The warm-up programs' arrivals lie before the window.
    for (const p of programs.slice(0, 2)) expect(p.arrivalMs).toBeLessThan(w.startMs);
  });

  it("sorts by arrival whatever the input order, and ends one mean gap after the last without a cool-down", () => {
    const w = programWindow([...programs].reverse(), { warmupFraction: 0.5, cooldownFraction: 0 });
    expect(w.measuredIds).toEqual(["p5", "p6", "p7", "p8", "p9"]);
    expect(w.endMs).toBe(1000);
  });

  it("refuses shares that leave nothing to measure", () => {
    expect(() => programWindow(programs, { warmupFraction: 0.5, cooldownFraction: 0.5 })).toThrow(RangeError);
    expect(() => programWindow(programs.slice(0, 2), { warmupFraction: 0.2, cooldownFraction: 0.2 })).not.toThrow();
    expect(() => programWindow(programs.slice(0, 2), { warmupFraction: 0.5, cooldownFraction: 0 })).toThrow(/too few/);
  });
});

describe("trend", () => {
  it("least-squares growth over the window and the thirds' means", () => {
    const t = trend(
      Array.from({ length: 31 }, (_, i) => ({ atMs: i * 100, value: 5 + i / 3 })),
      0,
      3_000,
    );
    expect(t?.growth).toBeCloseTo(10, 9);
    expect(t?.slopePerSec).toBeCloseTo(10 / 3, 9);
    expect(t?.firstThirdMean).toBeCloseTo(5 + 5 / 3, 9);
    expect(t?.lastThirdMean).toBeCloseTo(5 + 25 / 3, 9);
  });

  it("ignores points outside the window; null with fewer than three inside", () => {
    expect(trend([{ atMs: -1, value: 100 }, { atMs: 0, value: 1 }, { atMs: 10, value: 1 }, { atMs: 20, value: 1 }, { atMs: 99, value: 50 }], 0, 20)?.growth).toBe(0);
    expect(trend([{ atMs: 0, value: 1 }, { atMs: 10, value: 2 }], 0, 10)).toBeNull();
  });
});

describe("assessStability", () => {
  const window = { startMs: 0, endMs: 600_000 };
  const arrivals = 300;
  const measured = (latency: (i: number) => number) => Array.from({ length: arrivals }, (_, i) => ({ arrivalMs: i * 2_000, latency: latency(i) }));
  const rand = flatPrng(7);

  it("a flat, noisy backlog with flat latency is stable", () => {
    const s = assessStability({ samples: samples(0, 600_000, 120, () => 20 + Math.round(rand() * 10 - 5)), window, arrivals, measured: measured(() => 1.5 + rand() * 0.5) });
    expect(s.reasons).toEqual([]);
    expect(s.stable).toBe(true);
    expect(Math.abs(s.backlog?.growth ?? Number.NaN)).toBeLessThan(0.05 * arrivals);
  });

  it("a backlog growing by more than 5 % of the window's arrivals is not", () => {
    // 20 → 60 programs across the window: 40 > 15.
    const s = assessStability({ samples: samples(0, 600_000, 120, (t) => 20 + (40 * t) / 600_000), window, arrivals, measured: measured(() => 1.5) });
    expect(s.stable).toBe(false);
    expect(s.reasons.join()).toMatch(/backlog .* grew by 40 across the window/);
  });

  it("just under the threshold passes, just over fails", () => {
    const grow = (by: number) => assessStability({ samples: samples(0, 600_000, 120, (t) => 20 + (by * t) / 600_000), window, arrivals, measured: measured(() => 1.5) }).stable;
    expect(grow(14)).toBe(true);
    expect(grow(16)).toBe(false);
  });

  it("calls piling up in the queues fail it too", () => {
    const s = assessStability({ samples: samples(0, 600_000, 120, () => 20, (t) => (30 * t) / 600_000), window, arrivals, measured: measured(() => 1.5) });
    expect(s.stable).toBe(false);
    expect(s.reasons.join()).toMatch(/calls waiting .* grew by 30/);
  });

  it("latency growing across the window fails it even with a flat backlog", () => {
    const s = assessStability({ samples: samples(0, 600_000, 120, () => 20), window, arrivals, measured: measured((i) => 1 + (2 * i) / arrivals), latencyMeasure: "slowdown" });
    expect(s.stable).toBe(false);
    expect(s.latency?.ratio).toBeGreaterThan(1.5);
    expect(s.reasons.join()).toMatch(/median slowdown of the window's last third/);
  });

  it("unfinished measured programs fail it", () => {
    const s = assessStability({ samples: samples(0, 600_000, 120, () => 20), window, arrivals, measured: measured((i) => (i === 7 ? Number.NaN : 1)).map((p) => ({ ...p, latency: Number.isNaN(p.latency) ? null : p.latency })) });
    expect(s.unfinished).toBe(1);
    expect(s.stable).toBe(false);
  });

  it("the backlog is counted beyond what running alone would leave in the system: a slow fill is not overload", () => {
    // Programs last 500 s alone and arrive every 2 s from t = 0: the system fills up
    // (to 250) during a window that starts at 100 s, as it would with no queueing.
    const unloaded = Array.from({ length: 400 }, (_, i) => ({ arrivalMs: i * 2_000, durationMs: 500_000 }));
    const alone = (t: number) => unloaded.filter((p) => p.arrivalMs <= t && t < p.arrivalMs + p.durationMs).length;
    const fill = samples(100_000, 700_000, 120, (t) => alone(t) + 3);
    const w = { startMs: 100_000, endMs: 700_000 };
    expect(assessStability({ samples: fill, window: w, arrivals, measured: measured(() => 1) }).stable).toBe(false);
    const s = assessStability({ samples: fill, window: w, arrivals, measured: measured(() => 1), unloaded });
    expect(s.stable).toBe(true);
    expect(s.backlog?.growth).toBeCloseTo(0, 6);
  });

  it("a window shorter than twice the median unloaded program is a burst, not a steady state", () => {
    const base = { samples: samples(0, 600_000, 120, () => 20), window, arrivals, measured: measured(() => 1) };
    expect(assessStability({ ...base, medianUnloadedMs: 299_000 }).stable).toBe(true);
    expect(assessStability({ ...base, medianUnloadedMs: 301_000 }).reasons.join()).toMatch(/a burst, not a steady state/);
  });
});

describe("computeSteadyState", () => {
  // Ten programs, one every 100 ms: 2 warm-up, 6 measured (p2..p7), 2 cool-down.
  const tenants = ["ten_a", "ten_b", "ten_a", "ten_b", "ten_a", "ten_a", "ten_b", "ten_a", "ten_b", "ten_a"];
  const kinds = ["chat", "chat", "chat", "tree-search", "chat", "tree-search", "chat", "chat", "chat", "chat"] as const;
  const programs = Array.from({ length: 10 }, (_, i) =>
    program({ programId: `p${i}`, arrivalMs: i * 100, finishMs: i * 100 + 50 * (i + 1), generatedTokens: 10, kind: kinds[i], tenantId: tenants[i] as string }),
  );
  const window = programWindow(programs, { warmupFraction: 0.2, cooldownFraction: 0.2 });
  const call = (programId: string, readyMs: number, dispatchMs: number, promoted = false): CallRecord => ({
    programId,
    callId: 0,
    thread: "main",
    readyMs,
    dispatchMs,
    finishMs: dispatchMs + 10,
    engineId: "e0",
    reason: "least-loaded",
    level: 0,
    promoted,
    startValueMs: 0,
    promptTokens: 100,
    cachedTokens: 40,
    outputTokens: 10,
    firstTokenMs: dispatchMs + 5,
  });
  const run: SteadyStateRun = {
    programs,
    engines: [
      engine({ engineId: "e0", window: { busyMs: 300, batchMs: 1200, kvMs: 150, kvMax: 0.9, batchMax: 7, steps: 30, preemptions: 2 } }),
      engine({ engineId: "e1", window: { busyMs: 150, batchMs: 300, kvMs: 30, kvMax: 0.4, batchMax: 3, steps: 15, preemptions: 0 } }),
    ],
    simEndMs: 1_000,
    wallMs: 1,
    events: 1,
    endedBy: "watched-finished",
    samples: samples(0, 1_000, 10, () => 2),
    calls: [
      call("p1", 150, 150), // before the window: not counted
      call("p2", 200, 200),
      call("p3", 300, 310, true), // held 10 ms, promoted
      call("p4", 400, 400.5), // 0.5 ms: under the epsilon
      call("p5", 500, 560),
      call("p6", 600, 600),
      call("p7", 700, 700),
      call("p8", 800, 900), // cool-down program, but issued... after the window ends (800): not counted
    ],
  };
  const m = computeSteadyState(run, {
    window,
    plannedOutputTokens: new Map(programs.map((p) => [p.programId, 10])),
    workTokens: new Map(programs.map((p, i) => [p.programId, 1_000 + i])),
  });

  it("measures the measured programs only: warm-up and cool-down are excluded", () => {
    expect(m.window).toMatchObject({ warmup: 2, measured: 6, cooldown: 2, startMs: 200, endMs: 800 });
    expect(m.overall.programs).toBe(6);
    // p2..p7 at (50 · (i + 1)) / 10 ms per token: 15, 20, 25, 30, 35, 40.
    expect(m.overall.meanMsPerToken).toBeCloseTo(27.5, 10);
    expect(m.overall.meanIsLowerBound).toBe(false);
    expect(m.overall.normalizedLatencyMsPerToken?.max).toBe(40);
  });

  it("the per-tenant and per-kind split adds up to the overall figure", () => {
    for (const groups of [m.byTenant, m.byKind]) {
      const parts = Object.values(groups);
      expect(parts.reduce((n, g) => n + g.programs, 0)).toBe(m.overall.programs);
      expect(parts.reduce((n, g) => n + g.calls, 0)).toBe(m.overall.calls);
      expect(parts.reduce((n, g) => n + g.heldCalls, 0)).toBe(m.overall.heldCalls);
      const weighted = parts.reduce((sum, g) => sum + (g.meanMsPerToken as number) * g.programs, 0) / m.overall.programs;
      expect(weighted).toBeCloseTo(m.overall.meanMsPerToken as number, 10);
    }
    expect(Object.keys(m.byTenant)).toEqual(["ten_a", "ten_b"]);
    expect(m.byTenant.ten_a?.programs).toBe(4); // p2, p4, p5, p7
    expect(m.byKind["tree-search"]?.programs).toBe(2); // p3, p5
  });

  it("engagement: calls issued in the window, held over 1 ms, hold mean and P99, promotions", () => {
    const e = m.engagement;
    expect(e.calls).toBe(6);
    expect(e.heldCalls).toBe(2);
    expect(e.heldShare).toBeCloseTo(2 / 6, 10);
    expect(e.holdMeanMs).toBeCloseTo((10 + 0.5 + 60) / 6, 10);
    expect(e.holdP99Ms).toBe(60);
    expect(e.heldMeanMs).toBe(35);
    expect(e.promotedCalls).toBe(1);
  });

  it("engines: busy share, time-weighted batch and KV over the window, maxima, preemptions", () => {
    const e = m.engagement;
    // Window 600 ms: busy 0.5 and 0.25; batch 4 and 2; KV 0.25 and 0.05.
    expect(e.engines.map((x) => x.busyShare)).toEqual([0.5, 0.25]);
    expect(e.busyShare).toBeCloseTo(0.375, 10);
    expect(e.meanBatch).toBeCloseTo(3, 10);
    expect(e.maxBatch).toBe(7);
    expect(e.meanKv).toBeCloseTo(0.15, 10);
    expect(e.maxKv).toBe(0.9);
    expect(e.preemptions).toBe(2);
  });

  it("throughput counted in the window, capacity from busy time, cache hits of calls finished in it", () => {
    // Finishing in [200, 800): p1 (200), p2 (350), p3 (500), p4 (650) → 4 in 0.6 s.
    expect(m.completionsPerSec).toBeCloseTo(4 / 0.6, 10);
    expect(m.arrivalsPerSec).toBeCloseTo(6 / 0.6, 10);
    expect(m.capacityPerSec).toBeCloseTo(4 / 0.6 / 0.375, 10);
    expect(m.cacheHitRate).toBeCloseTo(0.4, 10);
  });

  it("an unfinished measured program counts at its lower bound and makes the run unstable", () => {
    const cut = { ...run, programs: programs.map((p) => (p.programId === "p7" ? { ...p, finishMs: Number.NaN } : p)) };
    const u = computeSteadyState(cut, { window, plannedOutputTokens: new Map(programs.map((p) => [p.programId, 20])), workTokens: new Map(programs.map((p, i) => [p.programId, i])) });
    expect(u.overall.finished).toBe(5);
    expect(u.overall.meanIsLowerBound).toBe(true);
    // p7: (1000 − 700) / 20 planned tokens = 15 ms per token.
    expect(u.overall.meanMsPerToken).toBeCloseTo((15 + 20 + 25 + 30 + 35 + 15) / 6, 10);
    expect(u.stability.stable).toBe(false);
    expect(u.longestTenthUnfinished).toBe(1);
  });
});
