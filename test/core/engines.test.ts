import { describe, expect, it } from "vitest";
import { type EngineState, engineLoad, isAvailable, isSaturated } from "../../src/core/engines.js";
import { DEFAULT_SATURATION_SETTINGS } from "../../src/core/settings.js";

const idle: EngineState = { id: "e1", healthy: true, inFlight: 0, maxInFlight: 4, waiting: 0, kvUsage: 0 };
const s = DEFAULT_SATURATION_SETTINGS;

describe("isSaturated", () => {
  it("is false for an idle engine", () => {
    expect(isSaturated(idle, s)).toBe(false);
  });

  it("fires when the pool's buffer for the engine is full", () => {
    expect(isSaturated({ ...idle, inFlight: 3 }, s)).toBe(false);
    expect(isSaturated({ ...idle, inFlight: 4 }, s)).toBe(true);
  });

  it("fires when the engine's own waiting queue is above the limit", () => {
    expect(isSaturated({ ...idle, waiting: 4 }, s)).toBe(false);
    expect(isSaturated({ ...idle, waiting: 5 }, s)).toBe(true);
  });

  it("fires when KV cache use is above the limit", () => {
    expect(isSaturated({ ...idle, kvUsage: 0.8 }, s)).toBe(false);
    expect(isSaturated({ ...idle, kvUsage: 0.81 }, s)).toBe(true);
  });
});

describe("engineLoad and isAvailable", () => {
  it("counts in-flight calls plus the engine's own waiting queue", () => {
    expect(engineLoad({ ...idle, inFlight: 2, waiting: 3 })).toBe(5);
  });

  it("needs a healthy, unsaturated engine", () => {
    expect(isAvailable(idle, s)).toBe(true);
    expect(isAvailable({ ...idle, healthy: false }, s)).toBe(false);
    expect(isAvailable({ ...idle, inFlight: 4 }, s)).toBe(false);
  });
});
