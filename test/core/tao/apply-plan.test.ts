import { describe, expect, it } from "vitest";
import type { EngineState } from "../../../src/core/engines.js";
import { ProgramQueue } from "../../../src/core/queue.js";
import { DEFAULT_SATURATION_SETTINGS } from "../../../src/core/settings.js";
import { applyPlan, queuedByProgram } from "../../../src/core/tao/apply-plan.js";
import type { TaoPlanEntry } from "../../../src/core/tao/planner.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "../calls.js";

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 4, waiting: 0, kvUsage: 0, ...overrides };
}

function entry(programId: string, engineId: string, kind: TaoPlanEntry["kind"] = "dispatch"): TaoPlanEntry {
  return { programId, engineId, kind, tokens: 1_000, units: 1, credit: 0, ready: true };
}

function queueOf(...calls: [callId: string, programId: string, enqueuedAt: number][]): ProgramQueue {
  const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
  for (const [callId, programId, enqueuedAt] of calls) queue.enqueue(makeCall({ callId, programId, enqueuedAt }));
  return queue;
}

describe("applyPlan", () => {
  it("sends each entry's queued calls to its engine, in plan order and queue order", () => {
    const queue = queueOf(["p1", "p", 1], ["q1", "q", 2], ["p2", "p", 3]);
    expect([...queuedByProgram(queue, 5).entries()].map(([id, calls]) => [id, calls.map((c) => c.call.callId)])).toEqual([
      ["p", ["p1", "p2"]],
      ["q", ["q1"]],
    ]);
    const engines = [engine("A"), engine("B")];
    const result = applyPlan(queue, engines, 5, [entry("q", "B"), entry("p", "A")], DEFAULT_SATURATION_SETTINGS);
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId, d.reason, d.level])).toEqual([
      ["q1", "B", "tao-plan", 0],
      ["p1", "A", "tao-plan", 0],
      ["p2", "A", "tao-plan", 0],
    ]);
    expect(engines.map((e) => e.inFlight)).toEqual([2, 1]);
    expect(queue.size).toBe(0);
    expect(result).toMatchObject({ converted: [], blocked: [], reserve: [] });
  });

  it("respects the engine's slots and saturation: what does not fit stays queued", () => {
    const queue = queueOf(["p1", "p", 1], ["p2", "p", 2], ["q1", "q", 3]);
    const engines = [engine("A", { inFlight: 3 }), engine("B", { waiting: 9 })];
    const plan = [entry("p", "A"), entry("q", "B")];
    const result = applyPlan(queue, engines, 5, plan, DEFAULT_SATURATION_SETTINGS);
    expect(result.dispatches.map((d) => d.call.callId)).toEqual(["p1"]);
    expect(result.blocked).toEqual(plan);
    expect(queue.has("p2") && queue.has("q1")).toBe(true);
    expect(engines[0]?.inFlight).toBe(4);
  });

  it("lists reserve entries of programs with no call yet, and skips what it cannot place", () => {
    const queue = queueOf(["x1", "x", 1]);
    const result = applyPlan(queue, [engine("A")], 5, [entry("r", "A", "reserve"), entry("gone", "A"), entry("x", "nowhere"), entry("x", "A")], DEFAULT_SATURATION_SETTINGS);
    expect(result.reserve).toEqual([entry("r", "A", "reserve")]);
    // "x" was handled by its first entry (an unknown engine): a second entry for it is ignored.
    expect(result.dispatches).toEqual([]);
    expect(queue.has("x1")).toBe(true);
  });

  it("a held reservation's slot goes to its program's first call, even on a full engine", () => {
    const queue = queueOf(["r1", "r", 1], ["r2", "r", 2]);
    // The placeholder is one of the 4 in flight.
    const engines = [engine("A", { inFlight: 4 })];
    const result = applyPlan(queue, engines, 5, [entry("r", "A", "reserve")], DEFAULT_SATURATION_SETTINGS, new Map([["r", "A"]]));
    expect(result.dispatches.map((d) => [d.call.callId, d.reason])).toEqual([["r1", "tao-reserved"]]);
    expect(result.converted).toEqual(["r"]);
    expect(result.blocked).toHaveLength(1);
    expect(engines[0]?.inFlight).toBe(4);
    expect(queue.has("r2")).toBe(true);
  });

  it("an unhealthy engine takes nothing, reservation or not", () => {
    const queue = queueOf(["r1", "r", 1]);
    const result = applyPlan(queue, [engine("A", { healthy: false })], 5, [entry("r", "A")], DEFAULT_SATURATION_SETTINGS, new Map([["r", "A"]]));
    expect(result.dispatches).toEqual([]);
    expect(result.converted).toEqual([]);
    expect(result.blocked).toHaveLength(1);
  });
});
