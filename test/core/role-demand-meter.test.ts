import { describe, expect, it } from "vitest";
import { decodeTokenMs, prefillWorkMs, RoleDemandMeter, type RoleWorkModel } from "../../src/core/roles/index.js";

// Round figures, so the expected work can be worked out by hand.
const MODEL: RoleWorkModel = { decodeBaseMs: 10, perTokenMs: 0.1, perContextTokenMs: 0.001, perSequenceMs: 0.05, attentionMsPerTokenPair: 1e-6, batchSequences: 100 };
const IDLE = { decodeKvTokens: 0, prefillQueue: 0, decodeKvUsage: 0 };

describe("RoleDemandMeter", () => {
  it("prices prefill by the tokens to compute after the cached prefix, attention included", () => {
    // 1,000 fresh after 3,000 cached: 1,000 × 0.1 + 1e-6 × 1,000 × (3,000 + 500) = 100 + 3.5.
    expect(prefillWorkMs(MODEL, 1_000, 3_000)).toBeCloseTo(103.5, 9);
    expect(prefillWorkMs(MODEL, 0, 3_000)).toBe(0);
    // 0.05 + 2,000 × 0.001 + 10 / 100.
    expect(decodeTokenMs(MODEL, 2_000)).toBeCloseTo(2.15, 9);
  });

  it("reports a window's work per second, the backlog still waiting, and starts a new window", () => {
    const meter = new RoleDemandMeter(MODEL, 0);
    meter.prefillQueued("a", 1_000, 3_000);
    meter.prefillQueued("b", 1_000, 0);
    meter.prefillDone("a", 400);
    meter.decodeQueued("a", 4_000);
    meter.decoded(100, 2_000, 20);
    const first = meter.read(2_000, { decodeKvTokens: 10_000, prefillQueue: 1, decodeKvUsage: 0.25 });
    // (103.5 + 100.5) engine-ms over 2 s; 100 tokens × 2.15 ms over 2 s.
    expect(first.prefillWorkMsPerSec).toBeCloseTo(102, 9);
    expect(first.prefillBacklogMs).toBeCloseTo(100.5, 9); // b is still waiting
    expect(first.decodeWorkMsPerSec).toBeCloseTo(107.5, 9);
    expect(first.decodeKvTokens).toBe(14_000); // held + a's context on its way
    expect(first.ttftP95Ms).toBe(400);
    expect(first.itlMs).toBe(20);
    expect(first.prefillQueue).toBe(1);
    expect(first.decodeKvUsage).toBe(0.25);

    meter.decodeStarted("a");
    meter.forget("b");
    const second = meter.read(4_000, IDLE);
    expect(second).toEqual({
      prefillWorkMsPerSec: 0,
      prefillBacklogMs: 0,
      decodeWorkMsPerSec: 0,
      decodeKvTokens: 0,
      prefillQueue: 0,
      decodeKvUsage: 0,
      ttftP95Ms: undefined,
      itlMs: undefined,
    });
  });

  it("takes the 95th percentile of first-token times, and a failed prefill adds no sample", () => {
    const meter = new RoleDemandMeter(MODEL, 0);
    for (let i = 1; i <= 100; i++) {
      meter.prefillQueued(`c${i}`, 10, 0);
      meter.prefillDone(`c${i}`, i * 10);
    }
    meter.prefillQueued("failed", 10, 0);
    meter.prefillDone("failed", undefined);
    const demand = meter.read(10_000, IDLE);
    expect(demand.ttftP95Ms).toBe(960);
    expect(demand.prefillBacklogMs).toBe(0);
  });

  it("ignores non-positive token counts and a zero-length window reads as one millisecond", () => {
    const meter = new RoleDemandMeter(MODEL, 5_000);
    meter.decoded(0, 1_000);
    meter.decoded(-3, 1_000);
    meter.prefillQueued("x", 10, 0);
    const demand = meter.read(5_000, IDLE);
    expect(demand.decodeWorkMsPerSec).toBe(0);
    expect(demand.prefillWorkMsPerSec).toBeCloseTo(1_000.05, 9); // 1.00005 engine-ms over 1 ms
  });

  it("prices prefill work by what finished prefills found cached: arrivals and backlog scaled by the recent ratio of reported to estimated work", () => {
    const meter = new RoleDemandMeter(MODEL, 0);
    // Sent as 1,000 new tokens after 3,000 cached (103.5 engine-ms each), as the simulator assumes...
    meter.prefillQueued("a", 1_000, 3_000);
    meter.prefillQueued("b", 1_000, 3_000);
    // ...but a's engine had evicted the context: all 4,000 computed, 4,000 × 0.1 + 1e-6 × 4,000 × 2,000 = 408.
    meter.prefillDone("a", 100, { promptTokens: 4_000, cachedTokens: 0 });
    const first = meter.read(1_000, IDLE);
    expect(meter.prefillCostFactor).toBeCloseTo(408 / 103.5, 9);
    expect(first.prefillWorkMsPerSec).toBeCloseTo(2 * 408, 9);
    expect(first.prefillBacklogMs).toBeCloseTo(408, 9); // b, at a's price

    // A window with no report keeps the factor; a failed prefill or one never queued reports nothing.
    meter.prefillQueued("f", 1_000, 3_000);
    meter.prefillDone("f", undefined, undefined);
    meter.prefillDone("unknown", 50, { promptTokens: 4_000, cachedTokens: 0 });
    meter.read(2_000, IDLE);
    expect(meter.prefillCostFactor).toBeCloseTo(408 / 103.5, 9);

    // b found its prefix after all (103.5 as estimated): earlier windows count half each time, so the factor moves toward 1.
    meter.prefillDone("b", 100, { promptTokens: 4_000, cachedTokens: 3_000 });
    meter.read(3_000, IDLE);
    expect(meter.prefillCostFactor).toBeCloseTo((408 / 4 + 103.5) / (103.5 / 4 + 103.5), 9);
  });

  it("scales down an estimate that assumed nothing cached (the pool's) by what the engine found cached", () => {
    const meter = new RoleDemandMeter(MODEL, 0);
    meter.prefillQueued("a", 4_000, 0);
    meter.prefillDone("a", 100, { promptTokens: 4_000, cachedTokens: 3_000 });
    meter.prefillQueued("b", 4_000, 0);
    const demand = meter.read(1_000, IDLE);
    expect(meter.prefillCostFactor).toBeCloseTo(103.5 / 408, 9);
    expect(demand.prefillWorkMsPerSec).toBeCloseTo(2 * 103.5, 9);
    expect(demand.prefillBacklogMs).toBeCloseTo(103.5, 9);
  });

  it("takes a decode's inter-token spacing apart from its tokens, adding no work", () => {
    const meter = new RoleDemandMeter(MODEL, 0);
    meter.interToken(30);
    meter.interToken(Number.NaN);
    meter.decoded(10, 1_000);
    meter.interToken(10);
    const demand = meter.read(1_000, IDLE);
    expect(demand.itlMs).toBe(20);
    expect(demand.decodeWorkMsPerSec).toBeCloseTo(10 * (0.05 + 1_000 * 0.001 + 10 / 100), 9);
    expect(meter.read(2_000, IDLE).itlMs).toBeUndefined();
  });
});
