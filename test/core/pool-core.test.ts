import { describe, expect, it } from "vitest";
import { PoolCore } from "../../src/core/pool-core.js";
import type { QueuedCall } from "../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

/* The pool core with routing placement: slots, the KV account and the admission gate, as pool and simulator drive them. */

const SETTINGS = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS };

function routingCore(engines: { id: string; maxInFlight?: number; capacityTokens?: number }[], settings = SETTINGS) {
  return new PoolCore({ settings, engines: engines.map((e) => ({ maxInFlight: 8, ...e })) });
}

const ids = (dispatches: { call: QueuedCall; engineId: string }[]) => dispatches.map((d) => [d.call.programId, d.engineId]);

describe("PoolCore", () => {
  it("gives a slot back exactly once per dispatch, whatever the driver reports twice or never dispatched", () => {
    const core = routingCore([{ id: "A" }]);
    const call = makeCall({ programId: "prog_a", promptTokens: 1_000 });
    core.enqueue(call, 0);
    expect(ids(core.pump(0).dispatches)).toEqual([["prog_a", "A"]]);
    expect(core.engine("A")?.inFlight).toBe(1);
    expect(core.runningOn(call.callId)).toBe("A");
    core.attemptEnded(call.callId, { serviceMs: 100, outputTokens: 50 }, 100);
    core.attemptEnded(call.callId, { serviceMs: 100, outputTokens: 50 }, 101);
    core.attemptEnded("call_never_sent", { serviceMs: 100 }, 102);
    expect(core.engine("A")?.inFlight).toBe(0);
    expect(core.kv.projectedKvTokens("A")).toBe(0);
    expect(core.runningOn(call.callId)).toBeUndefined();
  });

  it("holds calls in priority order when KV binds, and lets the held one in when KV comes back", () => {
    // 10k tokens of KV at a 90 % target: one 6k-token context runs, a second waits.
    const core = routingCore([{ id: "A", capacityTokens: 10_000 }]);
    const running = makeCall({ programId: "prog_first", promptTokens: 6_000, enqueuedAt: 0 });
    core.enqueue(running, 0);
    core.pump(0);
    const deep = makeCall({ programId: "prog_deep", serviceMs: 3_000, pathMs: 3_000, promptTokens: 3_000, enqueuedAt: 1 });
    const fresh = makeCall({ programId: "prog_fresh", promptTokens: 3_000, enqueuedAt: 2 });
    core.enqueue(deep, 1);
    core.enqueue(fresh, 2);
    const held = core.pump(2);
    expect(held).toMatchObject({ dispatches: [], held: "kv" });
    core.attemptEnded(running.callId, { serviceMs: 500, outputTokens: 10 }, 500);
    // The fresh program (level 0) goes before the deep one sent earlier; both fit now.
    expect(ids(core.pump(500).dispatches)).toEqual([
      ["prog_fresh", "A"],
      ["prog_deep", "A"],
    ]);
  });

  it("routes a retry past the engines that failed it, and requeues it at its place when none will take it", () => {
    const core = routingCore([{ id: "A" }, { id: "B", maxInFlight: 1 }]);
    const call = makeCall({ programId: "prog_retry" });
    core.enqueue(call, 0);
    const [first] = core.pump(0).dispatches;
    core.attemptEnded(call.callId, { serviceMs: 0 }, 1);
    const retry = core.route(call, new Set([first!.engineId]), 1);
    expect(retry?.engineId).not.toBe(first!.engineId);
    core.attemptEnded(call.callId, { serviceMs: 0 }, 2);
    expect(core.route(call, new Set(["A", "B"]), 2)).toBeUndefined();
    core.requeue(call);
    expect(core.queue.size).toBe(1);
    expect(core.engines.map((e) => e.inFlight)).toEqual([0, 0]);
  });

  it("takes an engine's stated KV capacity unless one was configured, and forgets its cache credit when it goes down", () => {
    const core = routingCore([{ id: "A" }, { id: "B", capacityTokens: 50_000 }]);
    core.engineReadings(
      [
        { id: "A", healthy: true, waiting: 0, kvUsage: 0, kvCapacityTokens: 200_000 },
        { id: "B", healthy: true, waiting: 0, kvUsage: 0, kvCapacityTokens: 200_000 },
      ],
      0,
    );
    expect([core.kvCapacityTokens("A"), core.kvCapacityTokens("B")]).toEqual([200_000, 50_000]);
    core.signals.callArrived("prog_x", 0);
    core.callLeft("prog_x", { completed: true, engineId: "A", promptTokensEstimate: 5_000, facts: { usage: { promptTokens: 5_000, completionTokens: 10, cachedTokens: 0 } } }, 10);
    expect(core.signals.inspect("prog_x", 10)?.credits.A).toBeGreaterThan(0);
    core.engineReadings([{ id: "A", healthy: false, waiting: 0, kvUsage: 0 }], 20);
    expect(core.signals.inspect("prog_x", 20)?.credits.A).toBeUndefined();
    expect(core.engine("A")?.healthy).toBe(false);
  });

  it("without admission, the count cap alone holds: KV is still accounted", () => {
    const core = routingCore([{ id: "A", maxInFlight: 1, capacityTokens: 1_000 }], { ...SETTINGS, admission: undefined });
    core.enqueue(makeCall({ programId: "prog_big", promptTokens: 5_000 }), 0);
    core.enqueue(makeCall({ programId: "prog_next", promptTokens: 5_000 }), 0);
    const round = core.pump(0);
    expect(ids(round.dispatches)).toEqual([["prog_big", "A"]]);
    expect(round.held).toBe("count");
    expect(core.kv.projectedKvTokens("A")).toBeGreaterThan(5_000);
  });
});
