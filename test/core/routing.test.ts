import { describe, expect, it } from "vitest";
import type { EngineState } from "../../src/core/engines.js";
import { chooseEngine } from "../../src/core/routing.js";
import { DEFAULT_ROUTING_SETTINGS, DEFAULT_SATURATION_SETTINGS } from "../../src/core/settings.js";

function engine(id: string, load: number, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: load, maxInFlight: 1_000, waiting: 0, kvUsage: 0, ...overrides };
}

const route = (call: { promptTokens: number; affinityEngine?: string }, engines: EngineState[]) =>
  chooseEngine(call, engines, DEFAULT_ROUTING_SETTINGS, DEFAULT_SATURATION_SETTINGS);

const LONG = 2_048;
const SHORT = 2_047;

describe("chooseEngine", () => {
  it("sends a short prompt to the least-loaded engine, ignoring affinity", () => {
    const engines = [engine("e1", 5), engine("e2", 2), engine("e3", 9)];
    expect(route({ promptTokens: SHORT, affinityEngine: "e3" }, engines)).toEqual({ engineId: "e2", reason: "short-least-loaded" });
  });

  it("breaks load ties by the lowest id", () => {
    const engines = [engine("e3", 1), engine("e2", 1), engine("e4", 1)];
    expect(route({ promptTokens: 10 }, engines)?.engineId).toBe("e2");
  });

  it("counts the engine's own waiting queue in its load", () => {
    const engines = [engine("e1", 1, { waiting: 3 }), engine("e2", 2)];
    expect(route({ promptTokens: 10 }, engines)?.engineId).toBe("e2");
  });

  it("sends a long prompt to its affinity engine even when another is less loaded", () => {
    const engines = [engine("e1", 0), engine("e2", 30)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e2", reason: "long-affinity" });
  });

  it("sends a long prompt without affinity to the least-loaded engine", () => {
    const engines = [engine("e1", 3), engine("e2", 1)];
    expect(route({ promptTokens: LONG }, engines)).toEqual({ engineId: "e2", reason: "long-no-affinity" });
  });

  it("falls back when the affinity engine is unhealthy", () => {
    const engines = [engine("e1", 3), engine("e2", 1, { healthy: false }), engine("e3", 2)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e3", reason: "long-affinity-unavailable" });
  });

  it("falls back when the affinity engine is saturated", () => {
    const engines = [engine("e1", 3), engine("e2", 1, { kvUsage: 0.95 }), engine("e3", 2)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e3", reason: "long-affinity-unavailable" });
  });

  it("falls back when the affinity engine is not in the pool", () => {
    const engines = [engine("e1", 3), engine("e3", 2)];
    expect(route({ promptTokens: LONG, affinityEngine: "gone" }, engines)).toEqual({ engineId: "e3", reason: "long-affinity-unavailable" });
  });

  it("overrides affinity when the affinity engine is overloaded by both margins", () => {
    // 100 - 60 = 40 > 32 and 100 > 1.1 * 60 = 66
    const engines = [engine("e1", 60), engine("e2", 100)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e1", reason: "long-imbalance" });
  });

  it("keeps affinity when only the absolute margin is exceeded", () => {
    // 440 - 400 = 40 > 32, but 440 = 1.1 * 400 is not above it
    const engines = [engine("e1", 400), engine("e2", 440)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e2", reason: "long-affinity" });
  });

  it("keeps affinity when only the relative margin is exceeded", () => {
    // 32 - 0 = 32 is not above 32, though 32 > 1.1 * 0
    const engines = [engine("e1", 0), engine("e2", 32)];
    expect(route({ promptTokens: LONG, affinityEngine: "e2" }, engines)).toEqual({ engineId: "e2", reason: "long-affinity" });
  });

  it("returns undefined when no engine is healthy and unsaturated", () => {
    const engines = [engine("e1", 0, { healthy: false }), engine("e2", 0, { waiting: 10 }), engine("e3", 1_000)];
    expect(route({ promptTokens: 10 }, engines)).toBeUndefined();
    expect(route({ promptTokens: 10 }, [])).toBeUndefined();
  });

  it("never picks an unavailable engine as the least-loaded one", () => {
    const engines = [engine("e1", 0, { healthy: false }), engine("e2", 7)];
    expect(route({ promptTokens: 10 }, engines)?.engineId).toBe("e2");
  });
});
