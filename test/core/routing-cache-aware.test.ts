import { describe, expect, it } from "vitest";
import { takeDispatches } from "../../src/core/dispatch.js";
import type { EngineState } from "../../src/core/engines.js";
import { ProgramQueue, type QueuedCall } from "../../src/core/queue.js";
import { chooseEngine, DEFAULT_CACHE_THRESHOLD, type PrefixMatcher, ROUTING_POLICIES, type RoutingSettings, validateRoutingSettings } from "../../src/core/routing.js";
import { DEFAULT_ROUTING_SETTINGS, DEFAULT_SATURATION_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

/* SGLang's cache-aware router as a core routing policy: imbalance, then best match above the threshold, then the smallest tree. */

function engine(id: string, load = 0, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: load, maxInFlight: 1_000, waiting: 0, kvUsage: 0, ...overrides };
}

const routing: RoutingSettings = { ...DEFAULT_ROUTING_SETTINGS, policy: "cache-aware" };

/** Matches and tree sizes given per engine. */
function matcher(matched: Record<string, number>, trees: Record<string, number> = {}): PrefixMatcher<{ promptTokens: number }> {
  return { matchedTokens: (_, id) => matched[id] ?? 0, treeTokens: (id) => trees[id] ?? 0 };
}

const route = (engines: EngineState[], m: PrefixMatcher<{ promptTokens: number }>, promptTokens = 1_000, settings = routing) =>
  chooseEngine({ promptTokens }, engines, settings, DEFAULT_SATURATION_SETTINGS, undefined, m);

describe('"cache-aware" routing', () => {
  it("is a known policy with SGLang's threshold, and the pool's defaults do not change", () => {
    expect(ROUTING_POLICIES).toContain("cache-aware");
    expect(DEFAULT_CACHE_THRESHOLD).toBe(0.5);
    expect(DEFAULT_ROUTING_SETTINGS).toEqual({ longPromptTokens: 2_048, imbalanceAbs: 32, imbalanceRatio: 1.1, affinityTurnover: 0.5 });
    expect(() => validateRoutingSettings(routing)).not.toThrow();
    for (const bad of [-0.1, 1.5, Number.NaN]) expect(() => validateRoutingSettings({ ...routing, cacheThreshold: bad })).toThrow(/cacheThreshold/);
  });

  it("sends a call to the engine matching more than half its prompt, even when it is busier", () => {
    const engines = [engine("e1", 0), engine("e2", 20), engine("e3", 5)];
    expect(route(engines, matcher({ e1: 100, e2: 900, e3: 600 }))).toEqual({ engineId: "e2", reason: "cache-match" });
  });

  it("breaks equal matches by load, then id", () => {
    const engines = [engine("e2", 3), engine("e1", 3), engine("e3", 1)];
    expect(route(engines, matcher({ e1: 800, e2: 800, e3: 800 }))?.engineId).toBe("e3");
    expect(route(engines.slice(0, 2), matcher({ e1: 800, e2: 800 }))?.engineId).toBe("e1");
  });

  it("below or at the threshold, goes to the smallest tree (ties: load, then id), not the best match", () => {
    const engines = [engine("e1", 0), engine("e2", 1), engine("e3", 1)];
    expect(route(engines, matcher({ e1: 500 }, { e1: 50_000, e2: 10_000, e3: 10_000 }))).toEqual({ engineId: "e2", reason: "cache-smallest-tree" });
    expect(route(engines, matcher({}, { e1: 0, e2: 0, e3: 0 }))).toEqual({ engineId: "e1", reason: "cache-smallest-tree" });
    // A custom threshold moves the line.
    expect(route(engines, matcher({ e1: 500 }, { e1: 50_000 }), 1_000, { ...routing, cacheThreshold: 0.4 })).toEqual({ engineId: "e1", reason: "cache-match" });
    // An empty prompt matches nothing.
    expect(route(engines, matcher({ e1: 0 }, { e1: 5, e2: 1, e3: 9 }), 0)?.reason).toBe("cache-smallest-tree");
  });

  it("overrides the cache when loads are imbalanced by both margins: shortest queue", () => {
    // 100 - 60 = 40 > 32 and 100 > 66: imbalanced, so the least-loaded engine whatever the match.
    const engines = [engine("e1", 100), engine("e2", 60), engine("e3", 80, { waiting: 0 })];
    expect(route(engines, matcher({ e1: 1_000 }))).toEqual({ engineId: "e2", reason: "cache-imbalance" });
    // 40 - 10 = 30: not past the absolute margin.
    expect(route([engine("e1", 40), engine("e2", 10)], matcher({ e1: 1_000 }))).toEqual({ engineId: "e1", reason: "cache-match" });
    // 900 - 850 = 50 > 32, but 900 < 1.1 x 850: not relatively imbalanced.
    expect(route([engine("e1", 900), engine("e2", 850)], matcher({ e1: 1_000 }))?.reason).toBe("cache-match");
    // The engine's own waiting queue counts in its load (no saturation, as the direct policy runs it).
    const unsaturated = { maxEngineWaiting: Infinity, maxKvUsage: Infinity };
    const busy = [engine("e1", 10, { waiting: 40 }), engine("e2", 5)];
    expect(chooseEngine({ promptTokens: 1_000 }, busy, routing, unsaturated, undefined, matcher({ e1: 1_000 }))?.reason).toBe("cache-imbalance");
  });

  it("considers only healthy, unsaturated engines, and needs a matcher", () => {
    const engines = [engine("e1", 0, { healthy: false }), engine("e2", 0, { kvUsage: 0.95 }), engine("e3", 3)];
    expect(route(engines, matcher({ e1: 1_000, e2: 1_000 }))).toEqual({ engineId: "e3", reason: "cache-smallest-tree" });
    expect(route(engines.slice(0, 2), matcher({}))).toBeUndefined();
    expect(() => chooseEngine({ promptTokens: 1 }, [engine("e1")], routing, DEFAULT_SATURATION_SETTINGS)).toThrow(/prefix matcher/);
    expect(() => route([engine("e1")], matcher({ e1: Number.NaN }))).toThrow(/matched tokens/);
  });

  it("drives takeDispatches: each call goes where its prompt is", () => {
    const settings = { queue: { ...TEST_QUEUE_SETTINGS, priorityValue: "none" as const, starvationRatio: Infinity }, routing, saturation: { maxEngineWaiting: Infinity, maxKvUsage: Infinity } };
    const queue = new ProgramQueue(settings.queue);
    const home: Record<string, string> = { a: "e2", b: "e1" };
    queue.enqueue(makeCall({ callId: "a", programId: "pa", promptTokens: 100, enqueuedAt: 1 }));
    queue.enqueue(makeCall({ callId: "b", programId: "pb", promptTokens: 100, enqueuedAt: 2 }));
    queue.enqueue(makeCall({ callId: "c", programId: "pc", promptTokens: 100, enqueuedAt: 3 }));
    const prefixes: PrefixMatcher<QueuedCall> = {
      matchedTokens: (call, id) => (home[call.callId] === id ? 90 : 0),
      treeTokens: (id) => (id === "e3" ? 0 : 1_000),
    };
    const engines = [engine("e1"), engine("e2"), engine("e3")];
    const { dispatches } = takeDispatches(queue, engines, 10, settings, { prefixes });
    expect(dispatches.map((d) => [d.call.callId, d.engineId, d.reason])).toEqual([
      ["a", "e2", "cache-match"],
      ["b", "e1", "cache-match"],
      ["c", "e3", "cache-smallest-tree"],
    ]);
    expect(engines.map((e) => e.inFlight)).toEqual([1, 1, 1]);
  });
});
