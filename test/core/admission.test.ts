import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Admission, type AdmissionSettings, type DecodeCostModel, decodeStepMs } from "../../src/core/admission.js";
import { takeDispatches } from "../../src/core/dispatch.js";
import type { EngineState } from "../../src/core/engines.js";
import { ProgramQueue } from "../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

const SETTINGS: AdmissionSettings = {
  kvTarget: 0.9,
  stepTargetFactor: Infinity,
  defaultOutputTokens: 100,
  outputAverageWeight: 0.5,
};
const SATURATION = { maxEngineWaiting: 4, maxKvUsage: 0.8 };
/** The H100 decode terms of the simulator's default profile. */
const H100: DecodeCostModel = { decodeBaseMs: 7, perTokenMs: 0.029, perContextTokenMs: 0.000076, perSequenceMs: 0.0044 };

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 64, waiting: 0, kvUsage: 0, ...overrides };
}

describe("Admission's KV projection", () => {
  it("counts a program's prefix once across its parallel calls, plus each call's expected output", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1", capacityTokens: 10_000 }]);
    admission.sent("e1", { callId: "a1", programId: "pa", promptTokens: 3_000 });
    expect(admission.projectedKvTokens("e1")).toBe(3_100);
    // A sibling of the same program reads the same 3,000-token context and adds 500 of its own.
    admission.sent("e1", { callId: "a2", programId: "pa", promptTokens: 3_500 });
    expect(admission.projectedKvTokens("e1")).toBe(3_700);
    // Another program's context counts whole.
    expect(admission.projectedKvTokens("e1", { callId: "b1", programId: "pb", promptTokens: 2_000 })).toBe(5_800);
    // The longer sibling finishes: the prefix falls back to the shorter one's.
    admission.finished("e1", "a2");
    expect(admission.projectedKvTokens("e1")).toBe(3_100);
    admission.finished("e1", "a1");
    expect(admission.projectedKvTokens("e1")).toBe(0);
    expect(admission.callsOn("e1")).toBe(0);
  });

  it("learns expected output from finished calls (program first, then the pool), never above max_tokens", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1", capacityTokens: 10_000 }]);
    expect(admission.expectedOutputTokens({ programId: "pa" })).toBe(100);
    admission.sent("e1", { callId: "a1", programId: "pa", promptTokens: 10 });
    admission.finished("e1", "a1", 400);
    expect(admission.expectedOutputTokens({ programId: "pa" })).toBe(400);
    // A program with no history takes the pool's average.
    expect(admission.expectedOutputTokens({ programId: "pz" })).toBe(400);
    admission.sent("e1", { callId: "a2", programId: "pa", promptTokens: 10 });
    admission.finished("e1", "a2", 200);
    expect(admission.expectedOutputTokens({ programId: "pa" })).toBe(300);
    expect(admission.expectedOutputTokens({ programId: "pa", maxTokens: 50 })).toBe(50);
    // A call that ended without a count teaches nothing.
    admission.sent("e1", { callId: "a3", programId: "pa", promptTokens: 10 });
    admission.finished("e1", "a3");
    expect(admission.expectedOutputTokens({ programId: "pa" })).toBe(300);
  });

  it("adds what a scrape shows beyond its own account until the next scrape, and never subtracts", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1", capacityTokens: 10_000 }]);
    admission.sent("e1", { callId: "a1", programId: "pa", promptTokens: 1_900 });
    admission.scraped("e1", 0.5);
    // 5,000 in use against 2,000 accounted: 3,000 unexplained (another client, longer output).
    expect(admission.projectedKvTokens("e1")).toBe(5_000);
    admission.finished("e1", "a1");
    expect(admission.projectedKvTokens("e1")).toBe(3_000);
    admission.scraped("e1", 0);
    expect(admission.projectedKvTokens("e1")).toBe(0);
    // Below the account (the call has not grown to its peak yet): the account stands.
    admission.sent("e1", { callId: "a2", programId: "pa", promptTokens: 1_900 });
    admission.scraped("e1", 0.01);
    expect(admission.projectedKvTokens("e1")).toBe(2_000);
  });
});

describe("Admission.holdReason", () => {
  it("holds a call whose context would pass the KV target, but an idle engine takes any call", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1", capacityTokens: 10_000 }]);
    const big = { callId: "big", programId: "pb", promptTokens: 20_000 };
    expect(admission.holdReason(engine("e1"), big, SATURATION)).toBeUndefined();
    admission.sent("e1", { callId: "a1", programId: "pa", promptTokens: 6_000 });
    const busy = engine("e1", { inFlight: 1 });
    expect(admission.holdReason(busy, { callId: "b", programId: "pb", promptTokens: 2_700 }, SATURATION)).toBeUndefined();
    expect(admission.holdReason(busy, { callId: "c", programId: "pc", promptTokens: 2_801 }, SATURATION)).toBe("kv");
    // The same program's next call shares the 6,000-token prefix: it fits.
    expect(admission.holdReason(busy, { callId: "a2", programId: "pa", promptTokens: 8_000 }, SATURATION)).toBeUndefined();
  });

  it("holds by step time once the projected decode step passes the target", () => {
    const admission = new Admission({ ...SETTINGS, stepTargetMs: 20 }, [{ id: "e1", capacityTokens: 1_000_000, costModel: H100 }]);
    // 7 ms floor + 0.076 µs per context token: 100k tokens of context add 7.6 ms.
    admission.sent("e1", { callId: "a1", programId: "pa", promptTokens: 99_900 });
    const busy = engine("e1", { inFlight: 1 });
    expect(admission.projectedStepMs(busy)).toBeCloseTo(decodeStepMs(H100, 1, 100_000));
    expect(admission.holdReason(busy, { callId: "b", programId: "pb", promptTokens: 60_000 }, SATURATION)).toBeUndefined();
    expect(admission.holdReason(busy, { callId: "c", programId: "pc", promptTokens: 80_000 }, SATURATION)).toBe("step-time");
    expect(admission.stepTargetMs("e1")).toBe(20);
    // Default: the factor times the floor.
    const byFactor = new Admission({ ...SETTINGS, stepTargetFactor: 2 }, [{ id: "e1", costModel: H100 }]);
    expect(byFactor.stepTargetMs("e1")).toBe(14);
  });

  it("keeps the safety limits: unhealthy, the count cap, the engine's own backlog; unknown capacity falls back to scraped KV use", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1" }]);
    const call = { callId: "x", programId: "px", promptTokens: 10 };
    expect(admission.holdReason(engine("e1", { healthy: false }), call, SATURATION)).toBe("unhealthy");
    expect(admission.holdReason(engine("e1", { inFlight: 64 }), call, SATURATION)).toBe("count");
    expect(admission.holdReason(engine("e1", { waiting: 5 }), call, SATURATION)).toBe("engine-backlog");
    expect(admission.holdReason(engine("e1", { kvUsage: 0.85 }), call, SATURATION)).toBe("kv");
    expect(admission.holdReason(engine("e1", { kvUsage: 0.75 }), call, SATURATION)).toBeUndefined();
  });

  it("refuses invalid settings and engines", () => {
    expect(() => new Admission({ ...SETTINGS, kvTarget: 0 }, [])).toThrow(/kvTarget/);
    expect(() => new Admission({ ...SETTINGS, stepTargetFactor: 0.5 }, [])).toThrow(/stepTargetFactor/);
    expect(() => new Admission(SETTINGS, [{ id: "e1", capacityTokens: -1 }])).toThrow(/capacity/);
    expect(() => new Admission(SETTINGS, [{ id: "e1", costModel: { ...H100, perTokenMs: Number.NaN } }])).toThrow(/perTokenMs/);
    expect(() => new Admission(SETTINGS, [{ id: "e1" }]).projectedKvTokens("e2")).toThrow(/e2/);
  });
});

describe("takeDispatches with admission", () => {
  const dispatchSettings = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS, admission: SETTINGS };

  it("holds the next call in order when no engine has KV room for it, and lets nothing behind it overtake", () => {
    const admission = new Admission(SETTINGS, [{ id: "e1", capacityTokens: 10_000 }]);
    const engines = [engine("e1")];
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    // Running: one long-context call.
    queue.enqueue(makeCall({ callId: "run", programId: "p-run", promptTokens: 6_000, pathMs: 0, enqueuedAt: 0 }));
    expect(takeDispatches(queue, engines, 0, dispatchSettings, { admission }).dispatches.map((d) => d.call.callId)).toEqual(["run"]);
    // Waiting: a short program's big call (top level), then a long program's small one (lower level).
    queue.enqueue(makeCall({ callId: "short-big", programId: "p-short", promptTokens: 4_000, pathMs: 100, enqueuedAt: 1 }));
    queue.enqueue(makeCall({ callId: "long-small", programId: "p-long", promptTokens: 100, pathMs: 5_000, enqueuedAt: 0 }));
    const round = takeDispatches(queue, engines, 2, dispatchSettings, { admission });
    expect(round.dispatches).toEqual([]);
    expect(round.held).toBe("kv");
    expect(queue.size).toBe(2);

    // The running call finishes: the held call enters first, in program-priority order.
    admission.finished("e1", "run", 100);
    engines[0]!.inFlight -= 1;
    const next = takeDispatches(queue, engines, 3, dispatchSettings, { admission });
    expect(next.dispatches.map((d) => d.call.callId)).toEqual(["short-big", "long-small"]);
    expect(next.held).toBeUndefined();
  });

  it("routes a call only among engines that admit it", () => {
    const admission = new Admission(SETTINGS, [
      { id: "e1", capacityTokens: 10_000 },
      { id: "e2", capacityTokens: 10_000 },
    ]);
    admission.sent("e1", { callId: "x", programId: "px", promptTokens: 8_000 });
    const engines = [engine("e1", { inFlight: 1 }), engine("e2", { inFlight: 3 })];
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    // Affinity says e1 (the program's cache), but e1 has no room: the call goes to e2.
    queue.enqueue(makeCall({ callId: "c", programId: "pc", promptTokens: 3_000, affinityEngine: "e1" }));
    const round = takeDispatches(queue, engines, 0, dispatchSettings, { admission });
    expect(round.dispatches.map((d) => [d.call.callId, d.engineId])).toEqual([["c", "e2"]]);
    expect(admission.callsOn("e2")).toBe(1);
  });

  it("never takes an engine with calls past its KV target (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ prompt: fc.integer({ min: 1, max: 6_000 }), program: fc.integer({ min: 0, max: 5 }), finish: fc.boolean() }), {
          minLength: 1,
          maxLength: 60,
        }),
        (steps) => {
          const admission = new Admission(SETTINGS, [
            { id: "e1", capacityTokens: 10_000 },
            { id: "e2", capacityTokens: 10_000 },
          ]);
          const engines = [engine("e1"), engine("e2")];
          const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
          const running: { callId: string; engineId: string }[] = [];
          steps.forEach((step, i) => {
            queue.enqueue(makeCall({ callId: `c${i}`, programId: `p${step.program}`, promptTokens: step.prompt, enqueuedAt: i }));
            if (step.finish && running.length > 0) {
              const done = running.shift()!;
              admission.finished(done.engineId, done.callId, 50);
              engines.find((e) => e.id === done.engineId)!.inFlight -= 1;
            }
            for (const d of takeDispatches(queue, engines, i, dispatchSettings, { admission }).dispatches) {
              running.push({ callId: d.call.callId, engineId: d.engineId });
            }
            for (const e of engines) {
              // Past the target only with a single call, which an idle engine always takes.
              if (e.inFlight > 1) expect(admission.projectedKvTokens(e.id)).toBeLessThanOrEqual(9_000);
            }
          });
        },
      ),
    );
  });
});
