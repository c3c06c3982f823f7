import { describe, expect, it } from "vitest";
import { takeDispatches } from "../../src/core/dispatch.js";
import type { EngineState } from "../../src/core/engines.js";
import { isStarving, priorityValueOf, ProgramQueue, validateQueueSettings } from "../../src/core/queue.js";
import { chooseEngine, nextRoundRobin, type RoundRobinCursor, validateRoutingSettings } from "../../src/core/routing.js";
import { DEFAULT_DISPATCH_SETTINGS, DEFAULT_ROUTING_SETTINGS, DEFAULT_SATURATION_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

/* The simulator's baselines added to the core: "none" and "oracle" values, least-loaded and round-robin routing. */

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 1_000, waiting: 0, kvUsage: 0, ...overrides };
}

describe('priority value "none"', () => {
  const settings = { ...TEST_QUEUE_SETTINGS, priorityValue: "none" as const };

  it("puts every call at the top level, whatever its program received", () => {
    expect(priorityValueOf({ serviceMs: 90_000, pathMs: 50_000 }, settings)).toBe(0);
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ callId: "old", serviceMs: 100_000, pathMs: 100_000, enqueuedAt: 1 }));
    queue.enqueue(makeCall({ callId: "new", enqueuedAt: 2 }));
    expect(queue.depthByLevel(3)).toEqual([2, 0, 0, 0]);
    // FCFS within the level: the long program's call was first.
    expect(queue.dequeue(3)?.call.callId).toBe("old");
    expect(queue.dequeue(3)?.call.callId).toBe("new");
  });

  it("never promotes (everything is already at level 0)", () => {
    const call = makeCall({ waitMs: 1e9, enqueuedAt: 0 });
    const queue = new ProgramQueue(settings);
    queue.enqueue(call);
    expect(queue.dequeue(1e9)).toMatchObject({ level: 0, promoted: false, naturalLevel: 0 });
  });
});

describe('priority value "oracle"', () => {
  const settings = { ...TEST_QUEUE_SETTINGS, priorityValue: "oracle" as const, starvationRatio: Infinity };

  it("orders by the program's remaining work, shortest first", () => {
    expect(priorityValueOf({ serviceMs: 0, pathMs: 0, remainingMs: 3_000 }, settings)).toBe(3_000);
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ callId: "long-left", serviceMs: 0, remainingMs: 5_000, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "short-left", serviceMs: 60_000, remainingMs: 500, enqueuedAt: 1 }));
    queue.enqueue(makeCall({ callId: "middle", remainingMs: 1_500, enqueuedAt: 2 }));
    const order = [queue.dequeue(3), queue.dequeue(3), queue.dequeue(3)].map((d) => d?.call.callId);
    expect(order).toEqual(["short-left", "middle", "long-left"]);
  });

  it("refuses a call without remainingMs, and a negative one, changing nothing", () => {
    const queue = new ProgramQueue(settings);
    expect(() => queue.enqueue(makeCall({ callId: "x" }))).toThrow(/remainingMs/);
    expect(() => queue.enqueue(makeCall({ callId: "y", remainingMs: -1 }))).toThrow(/remainingMs/);
    expect(queue.size).toBe(0);
    expect(() => priorityValueOf({ serviceMs: 0, pathMs: 0 }, settings)).toThrow(/remainingMs/);
  });

  it("is ignored by the other values", () => {
    const atlas = new ProgramQueue(TEST_QUEUE_SETTINGS);
    atlas.enqueue(makeCall({ callId: "a", pathMs: 1_500, remainingMs: 0 }));
    expect(atlas.depthByLevel(0)).toEqual([0, 1, 0, 0]);
  });

  it("uses remaining work in the starvation rule when enabled", () => {
    const withBeta = { ...settings, starvationRatio: 2 };
    const call = makeCall({ remainingMs: 1_000, waitMs: 0, enqueuedAt: 0 });
    expect(isStarving(call, 2_000, withBeta)).toBe(false);
    expect(isStarving(call, 2_001, withBeta)).toBe(true);
  });
});

describe("queue settings validation", () => {
  it("accepts the four values and rejects others", () => {
    for (const priorityValue of ["plas", "atlas", "none", "oracle"] as const) {
      expect(() => validateQueueSettings({ ...TEST_QUEUE_SETTINGS, priorityValue })).not.toThrow();
    }
    expect(() => validateQueueSettings({ ...TEST_QUEUE_SETTINGS, priorityValue: "sjf" as "plas" })).toThrow(/priorityValue/);
  });
});

describe("least-loaded routing policy", () => {
  const routing = { ...DEFAULT_ROUTING_SETTINGS, policy: "least-loaded" as const };

  it("ignores affinity even for a long prompt", () => {
    const engines = [engine("e1", { inFlight: 1 }), engine("e2", { inFlight: 3 })];
    expect(chooseEngine({ promptTokens: 50_000, affinityEngine: "e2" }, engines, routing, DEFAULT_SATURATION_SETTINGS)).toEqual({
      engineId: "e1",
      reason: "least-loaded",
    });
  });

  it("finds no engine when all are saturated", () => {
    const engines = [engine("e1", { kvUsage: 0.9 })];
    expect(chooseEngine({ promptTokens: 1 }, engines, routing, DEFAULT_SATURATION_SETTINGS)).toBeUndefined();
  });
});

describe("round-robin routing policy", () => {
  const routing = { ...DEFAULT_ROUTING_SETTINGS, policy: "round-robin" as const };

  it("cycles over the engines in list order, ignoring load and affinity", () => {
    const engines = [engine("e1", { inFlight: 50 }), engine("e2"), engine("e3")];
    const cursor: RoundRobinCursor = { next: 0 };
    const picks = Array.from({ length: 7 }, () =>
      chooseEngine({ promptTokens: 5_000, affinityEngine: "e3" }, engines, routing, DEFAULT_SATURATION_SETTINGS, cursor),
    );
    expect(picks.map((p) => p?.engineId)).toEqual(["e1", "e2", "e3", "e1", "e2", "e3", "e1"]);
    expect(picks[0]?.reason).toBe("round-robin");
    expect(cursor.next).toBe(1);
  });

  it("skips unavailable engines without losing its place", () => {
    const engines = [engine("e1"), engine("e2", { healthy: false }), engine("e3", { inFlight: 2, maxInFlight: 2 })];
    const cursor: RoundRobinCursor = { next: 1 };
    expect(nextRoundRobin(engines, DEFAULT_SATURATION_SETTINGS, cursor)?.id).toBe("e1");
    expect(cursor.next).toBe(1);
    engines[0] = engine("e1", { healthy: false });
    expect(nextRoundRobin(engines, DEFAULT_SATURATION_SETTINGS, cursor)).toBeUndefined();
    expect(cursor.next).toBe(1);
    expect(nextRoundRobin([], DEFAULT_SATURATION_SETTINGS, cursor)).toBeUndefined();
  });

  it("needs a valid cursor", () => {
    expect(() => chooseEngine({ promptTokens: 1 }, [engine("e1")], routing, DEFAULT_SATURATION_SETTINGS)).toThrow(/cursor/);
    expect(() => nextRoundRobin([engine("e1")], DEFAULT_SATURATION_SETTINGS, { next: -1 })).toThrow(/cursor/);
  });

  it("rejects an unknown policy", () => {
    expect(() => validateRoutingSettings({ ...DEFAULT_ROUTING_SETTINGS, policy: "random" as "affinity" })).toThrow(/policy/);
    expect(() => validateRoutingSettings(DEFAULT_ROUTING_SETTINGS)).not.toThrow();
  });

  it("drives takeDispatches with unlimited engines: every call goes out at once, in turn", () => {
    const settings = {
      queue: { ...TEST_QUEUE_SETTINGS, priorityValue: "none" as const, starvationRatio: Infinity },
      routing,
      saturation: { maxEngineWaiting: Infinity, maxKvUsage: Infinity },
    };
    const queue = new ProgramQueue(settings.queue);
    for (let i = 0; i < 5; i++) queue.enqueue(makeCall({ callId: `c${i}`, serviceMs: 1_000 * (5 - i), enqueuedAt: i }));
    const engines = [engine("e1", { maxInFlight: Infinity }), engine("e2", { maxInFlight: Infinity, waiting: 99, kvUsage: 1 })];
    const cursor: RoundRobinCursor = { next: 0 };
    const { dispatches } = takeDispatches(queue, engines, 10, settings, { cursor });
    expect(dispatches.map((d) => [d.call.callId, d.engineId, d.level])).toEqual([
      ["c0", "e1", 0],
      ["c1", "e2", 0],
      ["c2", "e1", 0],
      ["c3", "e2", 0],
      ["c4", "e1", 0],
    ]);
    expect(queue.size).toBe(0);
    expect(engines.map((e) => e.inFlight)).toEqual([3, 2]);
  });
});

describe("defaults", () => {
  it("keep the pool's behaviour: affinity routing, PLAS value", () => {
    expect(DEFAULT_ROUTING_SETTINGS.policy).toBeUndefined();
    expect(DEFAULT_DISPATCH_SETTINGS.queue.priorityValue).toBe("plas");
    const engines = [engine("e1"), engine("e2", { inFlight: 3 })];
    expect(chooseEngine({ promptTokens: 5_000, affinityEngine: "e2" }, engines, DEFAULT_ROUTING_SETTINGS, DEFAULT_SATURATION_SETTINGS)).toEqual({
      engineId: "e2",
      reason: "long-affinity",
    });
  });
});
