import { describe, expect, it } from "vitest";
import { AffinityTurnover } from "../../../src/core/kv/affinity-turnover.js";
import { PoolCore } from "../../../src/core/pool-core.js";
import type { QueuedCall } from "../../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS, withAffinityTurnover } from "../../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "../calls.js";

/* A program's affinity hint dropped once its engine has turned over its KV (the routing's turnover rule). */

const CAPACITY = 100_000;
const used = (prompt: number, cached: number) => ({ promptTokens: prompt, cachedTokens: cached });

describe("AffinityTurnover", () => {
  it("judges a hint stale only once its engine computed more than the fraction of its capacity since the program's call left it", () => {
    const turnover = new AffinityTurnover(0.5);
    turnover.callLeft("prog_a", "A", used(40_000, 30_000));
    turnover.callLeft("prog_b", "A", used(60_000, 10_000)); // 50k computed: exactly half, not more
    expect(turnover.computedSince("prog_a", "A")).toBe(50_000);
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(false);
    turnover.callLeft("prog_c", "A", used(1_001, 1_000));
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(true);
    // Reading changes nothing; the program's next call there marks it afresh.
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(true);
    turnover.callLeft("prog_a", "A", used(40_000, 39_000));
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(false);
    // Computed elsewhere does not count against A; the hint's own engine is what is judged.
    turnover.callLeft("prog_d", "B", used(90_000, 1));
    expect(turnover.stale("prog_b", "A", CAPACITY)).toBe(false);
    expect(turnover.stale("prog_b", "B", CAPACITY)).toBe(false);
  });

  it("keeps a hint to an engine other than the one the program's last call left", () => {
    const turnover = new AffinityTurnover(0.5);
    turnover.callLeft("prog_a", "A", used(10, 5));
    turnover.callLeft("prog_a", "B", used(10, 5));
    turnover.callLeft("prog_x", "A", used(90_000, 5));
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(false);
    expect(turnover.stale("prog_unknown", "A", CAPACITY)).toBe(false);
  });

  it("judges nothing on an engine that never reported a cached token (every prompt would count whole)", () => {
    const turnover = new AffinityTurnover(0.5);
    turnover.callLeft("prog_a", "A", used(40_000, 0));
    turnover.callLeft("prog_b", "A", used(90_000, 0));
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(false);
    turnover.callLeft("prog_c", "A", used(100, 50));
    expect(turnover.stale("prog_a", "A", CAPACITY)).toBe(true);
  });

  it("ignores usage that is not a pair of finite counts (it runs where a call settles)", () => {
    const turnover = new AffinityTurnover(0.5);
    turnover.callLeft("prog_a", "A", used(10, 5));
    for (const bad of [used(Number.NaN, 1), used(Number.POSITIVE_INFINITY, 1), used(90_000, -1)]) expect(() => turnover.callLeft("prog_b", "A", bad)).not.toThrow();
    expect(turnover.computedSince("prog_a", "A")).toBe(0);
  });

  it("forgets an ended program, and refuses a fraction that is not a positive number", () => {
    const turnover = new AffinityTurnover(1);
    turnover.callLeft("prog_a", "A", used(10, 5));
    expect(turnover.marks).toBe(1);
    turnover.forgetProgram("prog_a");
    expect(turnover.marks).toBe(0);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) expect(() => new AffinityTurnover(bad)).toThrow(RangeError);
  });
});

describe("PoolCore with the turnover rule", () => {
  const engines = [
    { id: "A", maxInFlight: 8, capacityTokens: CAPACITY },
    { id: "B", maxInFlight: 8, capacityTokens: CAPACITY },
  ];
  const core = (fraction: number | null) =>
    new PoolCore({ settings: { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS, routing: withAffinityTurnover(DEFAULT_DISPATCH_SETTINGS.routing, fraction) }, engines });

  /** A call of `program` left A having computed `computed` prompt tokens there (1,000 more were cached). */
  const leftA = (pool: PoolCore, program: string, computed: number, now: number) =>
    pool.callLeft(program, { completed: true, engineId: "A", facts: { usage: { promptTokens: computed + 1_000, cachedTokens: 1_000, completionTokens: 10 } }, promptTokensEstimate: computed }, now);

  /** The program's first call runs on A and leaves; then other programs compute `churn` tokens on A; then its next long call comes back with the hint to A, while A is busier than B but within the imbalance margins. */
  function nextCallAfter(pool: PoolCore, churn: number) {
    leftA(pool, "prog_long", 10_000, 0);
    leftA(pool, "prog_other", churn, 1);
    const busy = makeCall({ programId: "prog_busy", promptTokens: 100 });
    pool.enqueue(busy, 2);
    expect(pool.pump(2).dispatches.map((d) => d.engineId)).toEqual(["A"]);
    const next: QueuedCall = makeCall({ programId: "prog_long", promptTokens: 31_000, affinityEngine: "A" });
    pool.enqueue(next, 3);
    return pool.pump(3).dispatches.map((d) => [d.engineId, d.reason]);
  }

  it("sends a long call to the least-loaded engine once its program's engine turned over, saying why", () => {
    const pool = core(0.5);
    expect(nextCallAfter(pool, 60_000)).toEqual([["B", "long-affinity-turned-over"]]);
    expect(pool.affinityHintsDropped).toBe(1);
  });

  it("keeps the hint while the turnover is under the fraction, and always with the rule off", () => {
    const under = core(0.5);
    expect(nextCallAfter(under, 40_000)).toEqual([["A", "long-affinity"]]);
    expect(under.affinityHintsDropped).toBe(0);
    const off = core(null);
    expect(nextCallAfter(off, 600_000)).toEqual([["A", "long-affinity"]]);
    expect(off.affinityHintsDropped).toBe(0);
  });

  it("keeps the hint of a call whose prefix the caller's retention keeps there, whatever the turnover", () => {
    const pool = core(0.5);
    leftA(pool, "prog_long", 10_000, 0);
    leftA(pool, "prog_other", 90_000, 1);
    const kept = makeCall({ programId: "prog_long", promptTokens: 31_000, affinityEngine: "A" });
    pool.enqueue(kept, 2, true);
    expect(kept.affinityEngine).toBe("A");
    expect(pool.affinityHintsDropped).toBe(0);
    expect(pool.pump(2).dispatches.map((d) => [d.engineId, d.reason])).toEqual([["A", "long-affinity"]]);
  });

  it("changes nothing for a call the queue refuses", () => {
    const pool = core(0.5);
    leftA(pool, "prog_long", 10_000, 0);
    leftA(pool, "prog_other", 90_000, 1);
    const refused = makeCall({ programId: "prog_long", promptTokens: 31_000, affinityEngine: "A", weight: 0 });
    expect(() => pool.enqueue(refused, 2)).toThrow(RangeError);
    expect(refused.affinityEngine).toBe("A");
    expect(pool.affinityHintsDropped).toBe(0);
  });

  it("forgets the program's mark when the program ends", () => {
    const pool = core(0.5);
    leftA(pool, "prog_long", 10_000, 0);
    pool.programEnded("prog_long");
    leftA(pool, "prog_other", 90_000, 1);
    const next = makeCall({ programId: "prog_long", promptTokens: 31_000, affinityEngine: "A" });
    pool.enqueue(next, 2);
    expect(next.affinityEngine).toBe("A");
    expect(pool.affinityHintsDropped).toBe(0);
  });
});
