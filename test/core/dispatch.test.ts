import { describe, expect, it } from "vitest";
import { takeDispatches } from "../../src/core/dispatch.js";
import type { EngineState } from "../../src/core/engines.js";
import { ProgramQueue } from "../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

const settings = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS };

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 2, waiting: 0, kvUsage: 0, ...overrides };
}

describe("takeDispatches", () => {
  it("hands out calls in priority order until every engine's cap is reached", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    // Enqueued in reverse priority order.
    queue.enqueue(makeCall({ callId: "p3", pathMs: 5_000, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "p2", pathMs: 2_500, enqueuedAt: 1 }));
    queue.enqueue(makeCall({ callId: "p1", pathMs: 1_500, enqueuedAt: 2 }));
    queue.enqueue(makeCall({ callId: "p0b", pathMs: 10, enqueuedAt: 4 }));
    queue.enqueue(makeCall({ callId: "p0a", pathMs: 10, enqueuedAt: 3 }));
    const engines = [engine("e1"), engine("e2", { inFlight: 1 })];

    const { dispatches } = takeDispatches(queue, engines, 10, settings);

    expect(dispatches.map((d) => d.call.callId)).toEqual(["p0a", "p0b", "p1"]);
    expect(dispatches.map((d) => d.level)).toEqual([0, 0, 1]);
    expect(engines.map((e) => e.inFlight)).toEqual([2, 2]);
    expect(dispatches.map((d) => d.engineId).sort()).toEqual(["e1", "e1", "e2"]);
    expect(queue.size).toBe(2);
    expect(queue.has("p2") && queue.has("p3")).toBe(true);
    // Full engines: nothing more goes out, and nothing is lost.
    expect(takeDispatches(queue, engines, 10, settings)).toEqual({ dispatches: [], held: "count" });
    expect(queue.size).toBe(2);
  });

  it("spreads short prompts over the least-loaded engines as it assigns", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    for (let i = 0; i < 4; i++) queue.enqueue(makeCall({ callId: `c${i}`, enqueuedAt: i }));
    const engines = [engine("e1", { maxInFlight: 10 }), engine("e2", { maxInFlight: 10 })];
    const { dispatches } = takeDispatches(queue, engines, 10, settings);
    expect(dispatches.map((d) => [d.call.callId, d.engineId, d.reason])).toEqual([
      ["c0", "e1", "short-least-loaded"],
      ["c1", "e2", "short-least-loaded"],
      ["c2", "e1", "short-least-loaded"],
      ["c3", "e2", "short-least-loaded"],
    ]);
  });

  it("keeps a long prompt on its affinity engine and reports promotion", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "long", promptTokens: 5_000, affinityEngine: "e2", pathMs: 2_000, waitMs: 100_000 }));
    const engines = [engine("e1"), engine("e2", { inFlight: 1 })];
    expect(takeDispatches(queue, engines, 0, settings).dispatches).toEqual([
      expect.objectContaining({ engineId: "e2", reason: "long-affinity", level: 0, promoted: true }),
    ]);
    expect(engines[1]?.inFlight).toBe(2);
  });

  it("sends nothing to unhealthy or saturated engines", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "x" }));
    const engines = [engine("down", { healthy: false }), engine("busy", { waiting: 9 }), engine("full", { kvUsage: 0.99 })];
    // Held, and the most binding reason any engine gave is named.
    expect(takeDispatches(queue, engines, 0, settings)).toEqual({ dispatches: [], held: "kv" });
    expect(queue.has("x")).toBe(true);
    expect(engines.map((e) => e.inFlight)).toEqual([0, 0, 0]);
  });

  it("returns nothing for an empty queue", () => {
    expect(takeDispatches(new ProgramQueue(TEST_QUEUE_SETTINGS), [engine("e1")], 0, settings)).toEqual({ dispatches: [], held: undefined });
  });

  it("rejects duplicate engine ids without taking any call", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall());
    expect(() => takeDispatches(queue, [engine("e1"), engine("e1")], 0, settings)).toThrow(/unique/);
    expect(queue.size).toBe(1);
  });
});
