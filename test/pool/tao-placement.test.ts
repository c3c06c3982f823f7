import { describe, expect, it } from "vitest";
import type { EngineState } from "../../src/core/engines.js";
import { ProgramQueue, type QueuedCall } from "../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import type { StaleReason } from "../../src/core/tao/plan-validation.js";
import { TaoConfig } from "../../src/pool/tao/config.js";
import type { ReservationOutcome } from "../../src/core/tao/reservation-book.js";
import { PoolTaoPlacement } from "../../src/pool/tao/tao-placement.js";
import { ToolSignals } from "../../src/pool/tao/tool-signals.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "../core/calls.js";

const CAPACITY = 100_000;
const SETTINGS = TaoConfig.parse({});

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 4, waiting: 0, kvUsage: 0, ...overrides };
}

function setup(engines: EngineState[]) {
  const signals = new ToolSignals(SETTINGS.core);
  const stale: StaleReason[] = [];
  const reservations: ReservationOutcome[] = [];
  const errors: unknown[] = [];
  const tao = new PoolTaoPlacement({
    settings: SETTINGS,
    dispatch: DEFAULT_DISPATCH_SETTINGS,
    signals,
    kvCapacityTokens: new Map(engines.map((e) => [e.id, CAPACITY])),
    hooks: {
      onStale: (reason) => stale.push(reason),
      onReservation: (outcome) => reservations.push(outcome),
      onPlanError: (error) => errors.push(error),
    },
  });
  const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
  const enqueue = (call: Partial<QueuedCall>, now = 0) => {
    const queued = makeCall({ enqueuedAt: now, ...call });
    queue.enqueue(queued);
    signals.callArrived(queued.programId, now);
    return queued;
  };
  /** A program whose call completed on `engineId` with this context: cache credit there. */
  const warm = (programId: string, engineId: string, contextTokens: number, at: number) => {
    signals.callArrived(programId, at - 10);
    signals.callEnded(programId, at, { completed: true, engineId, promptTokensEstimate: contextTokens, facts: { usage: { promptTokens: contextTokens, completionTokens: 0, cachedTokens: 0 } } });
  };
  return { signals, tao, queue, enqueue, warm, stale, reservations, errors };
}

const summary = (dispatches: { call: QueuedCall; engineId: string; reason: string }[]) => dispatches.map((d) => [d.call.programId, d.engineId, d.reason]);

describe("PoolTaoPlacement: where calls go", () => {
  it("places a program on the engine holding its cache credit, even when that engine is busier", () => {
    // A is busier (its own queue) and fuller (KV); a program without credit goes to the emptier B.
    const engines = [engine("A", { waiting: 3, kvUsage: 0.3 }), engine("B")];
    const { tao, queue, enqueue, warm } = setup(engines);
    warm("prog_cached", "A", 20_000, 1_000);
    enqueue({ programId: "prog_cached", promptTokens: 20_500 }, 1_100);
    enqueue({ programId: "prog_fresh", promptTokens: 500 }, 1_100);
    expect(tao.plan(queue, engines, 1_100)?.entries.map((e) => [e.programId, e.engineId, e.kind])).toEqual([
      ["prog_cached", "A", "dispatch"],
      ["prog_fresh", "B", "dispatch"],
    ]);
    const pump = tao.pump(queue, engines, 1_100);
    expect(summary(pump.dispatches)).toEqual([
      ["prog_cached", "A", "tao-plan"],
      ["prog_fresh", "B", "tao-plan"],
    ]);
    expect(pump.needsPlan).toBe(false);
    expect(engines.map((e) => e.inFlight)).toEqual([1, 1]);
  });

  it("holds a program the plan left out for want of KV while the others go, and routes it once it has waited holdLeftOutMs", () => {
    // The light program's context does not fit any engine's KV, so the plan leaves it out.
    const engines = [engine("A", { maxInFlight: 1 }), engine("B", { healthy: false })];
    const { tao, queue, enqueue } = setup(engines);
    enqueue({ programId: "prog_heavy", serviceMs: 100_000, pathMs: 100_000, promptTokens: 1_000 }, 0);
    enqueue({ programId: "prog_light", promptTokens: 90_000 }, 10);
    const plan = tao.plan(queue, engines, 20);
    expect(plan?.entries.map((e) => e.programId)).toEqual(["prog_heavy"]);
    // The light one comes first in the queue's order, but sending it would overfill A's KV: it is held.
    const pump = tao.pump(queue, engines, 20);
    expect(summary(pump.dispatches)).toEqual([["prog_heavy", "A", "tao-plan"]]);
    expect(pump).toMatchObject({ held: 1, holdUntil: 10 + SETTINGS.holdLeftOutMs });
    // Held no longer than holdLeftOutMs: then routed, even though it still fits nowhere.
    engines[0]!.inFlight = 0;
    const overdue = 10 + SETTINGS.holdLeftOutMs;
    tao.plan(queue, engines, overdue);
    expect(summary(tao.pump(queue, engines, overdue).dispatches)).toEqual([["prog_light", "A", "long-no-affinity"]]);
  });

  it("lets no call the plan left out overtake a higher-priority call that arrived after the plan", () => {
    const engines = [engine("A", { maxInFlight: 1, inFlight: 1 })];
    const { tao, queue, enqueue } = setup(engines);
    enqueue({ programId: "prog_heavy", serviceMs: 100_000, pathMs: 100_000 }, 0);
    // The engine is full: the plan leaves the heavy program out (it is held until a plan places it).
    expect(tao.plan(queue, engines, 1)?.entries).toEqual([]);
    enqueue({ programId: "prog_light" }, 2);
    engines[0]!.inFlight = 0;
    expect(tao.pump(queue, engines, 3)).toMatchObject({ dispatches: [], needsPlan: true });
    tao.plan(queue, engines, 4);
    expect(summary(tao.pump(queue, engines, 4).dispatches)).toEqual([["prog_light", "A", "tao-plan"]]);
  });

  it("holds calls that arrived after the plan for the next plan, and asks for one", () => {
    const engines = [engine("A")];
    const { tao, queue, enqueue } = setup(engines);
    expect(tao.plan(queue, engines, 0)).toBeUndefined();
    enqueue({ programId: "prog_new" }, 5);
    expect(tao.pump(queue, engines, 5)).toMatchObject({ dispatches: [], needsPlan: true });
    tao.plan(queue, engines, 6);
    expect(summary(tao.pump(queue, engines, 6).dispatches)).toEqual([["prog_new", "A", "tao-plan"]]);
  });

  it("re-validates a plan before applying it: stale entries are skipped, counted by reason, and re-planned", () => {
    const engines = [engine("A")];
    const { tao, queue, enqueue, stale } = setup(engines);
    const gone = enqueue({ programId: "prog_gone" }, 0);
    enqueue({ programId: "prog_grows", promptTokens: 1_000 }, 0);
    tao.plan(queue, engines, 1);
    queue.remove(gone.callId);
    enqueue({ programId: "prog_grows", promptTokens: 9_000 }, 2);
    const pump = tao.pump(queue, engines, 3);
    expect(pump).toMatchObject({ dispatches: [], needsPlan: true });
    // The live snapshot holds programs with queued calls (or ready soon): one whose call left is gone.
    expect(stale.sort()).toEqual(["program-gone", "program-grew"]);
    // Counted once: the skipped entries are not checked again.
    tao.pump(queue, engines, 4);
    expect(stale).toHaveLength(2);
    tao.plan(queue, engines, 5);
    expect(summary(tao.pump(queue, engines, 5).dispatches)).toEqual([
      ["prog_grows", "A", "tao-plan"],
      ["prog_grows", "A", "tao-plan"],
    ]);
  });

  it("treats an expired plan as no plan", () => {
    const engines = [engine("A")];
    const { tao, queue, enqueue } = setup(engines);
    enqueue({ programId: "prog_late" }, 0);
    tao.plan(queue, engines, 0);
    expect(tao.pump(queue, engines, SETTINGS.core.planner.planTtlMs + 1)).toMatchObject({ dispatches: [], needsPlan: true });
  });

  it("routes every call by the routing rule while planning fails", () => {
    const engines = Array.from({ length: 255 }, (_, i) => engine(`e${String(i).padStart(3, "0")}`));
    const { tao, queue, enqueue, errors } = setup(engines);
    enqueue({ programId: "prog_any" }, 0);
    expect(tao.plan(queue, engines, 0)).toBeUndefined();
    expect(errors).toHaveLength(1);
    expect(summary(tao.pump(queue, engines, 0).dispatches)).toEqual([["prog_any", "e000", "short-least-loaded"]]);
  });
});

describe("PoolTaoPlacement: reservations", () => {
  function readySoon() {
    const engines = [engine("A"), engine("B")];
    const s = setup(engines);
    s.warm("prog_back", "B", 30_000, 1_000);
    // The client says its tool will take 300 ms: within the 1 s readiness horizon.
    s.signals.toolEvents("prog_back", [{ type: "tool_started", thread: "main", tool: "bash", expected_duration_ms: 300 }], 1_000, 1_000);
    const plan = s.tao.plan(s.queue, engines, 1_000);
    expect(plan?.entries.map((e) => [e.programId, e.engineId, e.kind])).toEqual([["prog_back", "B", "reserve"]]);
    expect(s.tao.pump(s.queue, engines, 1_000).dispatches).toEqual([]);
    expect(s.reservations).toEqual(["held"]);
    expect(engines.map((e) => e.inFlight)).toEqual([0, 1]);
    return { ...s, engines };
  }

  it("holds a slot on the program's cache engine, and its next call takes that slot", () => {
    const { tao, queue, enqueue, engines, reservations } = readySoon();
    enqueue({ programId: "prog_back", promptTokens: 30_500 }, 1_300);
    expect(summary(tao.pump(queue, engines, 1_300).dispatches)).toEqual([["prog_back", "B", "tao-reserved"]]);
    expect(reservations).toEqual(["held", "used"]);
    // The placeholder became the call: no slot leaked, none counted twice.
    expect(engines.map((e) => e.inFlight)).toEqual([0, 1]);
    expect(tao.reservationsHeld).toBe(0);
  });

  it("lets a reservation run out when the call does not come", () => {
    const { tao, queue, engines, reservations } = readySoon();
    tao.pump(queue, engines, 1_000 + SETTINGS.reservationTtlMs);
    expect(reservations).toEqual(["held", "expired"]);
    expect(engines.map((e) => e.inFlight)).toEqual([0, 0]);
  });

  it("reserves on a readiness probe (predicted time passed) only when planned and applied at one instant", () => {
    for (const applyAfterMs of [0, 1]) {
      const engines = [engine("A")];
      const { tao, queue, warm, stale, reservations } = setup(engines);
      warm("prog_probe", "A", 10_000, 1_000);
      // No tool named: the fallback guess (5 s); asked after that, the predictor answers once ("probe").
      const at = 1_000 + SETTINGS.core.readiness.fallbackMs + 100;
      expect(tao.plan(queue, engines, at)?.entries.map((e) => e.kind)).toEqual(["reserve"]);
      tao.pump(queue, engines, at + applyAfterMs);
      if (applyAfterMs === 0) expect(reservations).toEqual(["held"]);
      else expect([reservations, stale]).toEqual([[], ["program-gone"]]); // no longer ready soon: not in the live snapshot
    }
  });

  it("counts the held tokens against the engine's free KV in the next plan", () => {
    const { tao, queue, enqueue, engines } = readySoon();
    // B keeps 80 % × 100k − 30,256 reserved; a 60k-token program no longer fits there.
    enqueue({ programId: "prog_big", promptTokens: 60_000 }, 1_010);
    expect(tao.plan(queue, engines, 1_010)?.entries.map((e) => [e.programId, e.engineId])).toEqual([["prog_big", "A"]]);
  });
});
