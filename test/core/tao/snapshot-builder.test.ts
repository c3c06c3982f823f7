import { describe, expect, it } from "vitest";
import type { EngineState } from "../../../src/core/engines.js";
import { DEFAULT_SATURATION_SETTINGS } from "../../../src/core/settings.js";
import { CacheCreditLedger } from "../../../src/core/tao/cache-credit.js";
import { planPlacement } from "../../../src/core/tao/planner.js";
import { ReadinessPredictor } from "../../../src/core/tao/readiness.js";
import { DEFAULT_CACHE_CREDIT_SETTINGS, DEFAULT_PLANNER_SETTINGS, DEFAULT_READINESS_SETTINGS } from "../../../src/core/tao/settings.js";
import { buildSnapshot, engineFreeTokens } from "../../../src/core/tao/snapshot-builder.js";
import { makeCall } from "../calls.js";

const engine = (overrides: Partial<EngineState> = {}): EngineState => ({ id: "A", healthy: true, inFlight: 0, maxInFlight: 4, waiting: 0, kvUsage: 0.5, ...overrides });

describe("engine free tokens", () => {
  it("is the headroom below the KV saturation threshold, 0 when the engine cannot take a call", () => {
    expect(engineFreeTokens(engine(), 100_000, DEFAULT_SATURATION_SETTINGS)).toBe(30_000);
    expect(engineFreeTokens(engine({ kvUsage: 0.9 }), 100_000, DEFAULT_SATURATION_SETTINGS)).toBe(0);
    expect(engineFreeTokens(engine({ healthy: false }), 100_000, DEFAULT_SATURATION_SETTINGS)).toBe(0);
    expect(engineFreeTokens(engine({ inFlight: 4 }), 100_000, DEFAULT_SATURATION_SETTINGS)).toBe(0);
    expect(() => engineFreeTokens(engine(), -1, DEFAULT_SATURATION_SETTINGS)).toThrow(/kvCapacityTokens/);
  });
});

describe("building a snapshot from the core's state", () => {
  it("merges a program's queued calls, adds ready-soon programs between calls as reservations, with credits", () => {
    const readiness = new ReadinessPredictor(DEFAULT_READINESS_SETTINGS);
    const credits = new CacheCreditLedger(DEFAULT_CACHE_CREDIT_SETTINGS);
    credits.observe({ programId: "prog_x", engineId: "A", at: 0, contextTokens: 6_000 });
    credits.observe({ programId: "prog_t", engineId: "B", at: 10_000, contextTokens: 9_000 });
    readiness.toolStarted({ programId: "prog_t", tool: "bash", at: 9_000, expectedMs: 1_500 });
    readiness.toolStarted({ programId: "prog_slow", tool: "bash", at: 9_000, expectedMs: 60_000 });

    const snapshot = buildSnapshot({
      at: 10_000,
      queued: [makeCall({ programId: "prog_x", promptTokens: 3_000 }), makeCall({ programId: "prog_y", promptTokens: 500 }), makeCall({ programId: "prog_x", promptTokens: 1_000 })],
      betweenCalls: [
        { programId: "prog_t", contextTokens: 9_000 },
        { programId: "prog_slow", contextTokens: 4_000 },
      ],
      engines: [
        { engineId: "A", freeTokens: 20_000 },
        { engineId: "B", freeTokens: 20_000 },
      ],
      readiness,
      credits,
      outputAllowanceTokens: 100,
    });
    expect(snapshot.programs).toEqual([
      { programId: "prog_x", tokens: 4_200, queued: true, ready: true, credit: { A: 3_000 } },
      { programId: "prog_y", tokens: 600, queued: true, ready: true, credit: {} },
      { programId: "prog_t", tokens: 9_100, queued: false, ready: true, credit: { B: 9_000 } },
    ]);
    const plan = planPlacement(snapshot, DEFAULT_PLANNER_SETTINGS);
    expect(plan.entries.map((e) => [e.programId, e.engineId, e.kind])).toEqual([
      ["prog_x", "A", "dispatch"],
      ["prog_y", "A", "dispatch"],
      ["prog_t", "B", "reserve"],
    ]);
  });
});
