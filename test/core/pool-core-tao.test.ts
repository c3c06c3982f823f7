import { describe, expect, it } from "vitest";
import type { EngineState } from "../../src/core/engines.js";
import { PoolCore } from "../../src/core/pool-core.js";
import type { QueuedCall } from "../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import type { StaleReason } from "../../src/core/tao/plan-validation.js";
import type { TaoPlan } from "../../src/core/tao/planner.js";
import type { ReservationOutcome } from "../../src/core/tao/reservation-book.js";
import { defaultTaoPlacementSettings } from "../../src/core/tao/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

/*
 * The pool core with TAO placement: the object the pool and the simulator both drive.
 * pump(now, { plan: true }) is a round that plans first (the pool's plan loop, the
 * simulator's cadence); pump(now) applies the plan in force.
 */

const CAPACITY = 100_000;
const SETTINGS = defaultTaoPlacementSettings();

function setup(engines: { id: string; maxInFlight?: number; state?: Partial<EngineState> }[], capacity = CAPACITY) {
  const stale: StaleReason[] = [];
  const reservations: ReservationOutcome[] = [];
  const errors: unknown[] = [];
  const plans: TaoPlan[] = [];
  const core = new PoolCore({
    settings: { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS },
    engines: engines.map((e) => ({ id: e.id, maxInFlight: e.maxInFlight ?? 4, capacityTokens: capacity })),
    placement: { policy: "tao", settings: SETTINGS },
    hooks: {
      onStale: (reason) => stale.push(reason),
      onReservation: (outcome) => reservations.push(outcome),
      onPlanError: (error) => errors.push(error),
      onPlan: (plan) => plans.push(plan),
    },
  });
  for (const e of engines) Object.assign(core.engine(e.id) as EngineState, e.state ?? {});
  const enqueue = (call: Partial<QueuedCall>, now = 0) => {
    const queued = makeCall({ enqueuedAt: now, ...call });
    core.enqueue(queued, now);
    return queued;
  };
  /** A program whose call completed on `engineId` with this context: cache credit there. */
  const warm = (programId: string, engineId: string, contextTokens: number, at: number) => {
    core.signals.callArrived(programId, at - 10);
    core.callLeft(programId, { completed: true, engineId, promptTokensEstimate: contextTokens, facts: { usage: { promptTokens: contextTokens, completionTokens: 0, cachedTokens: 0 } } }, at);
  };
  const lastPlan = () => plans.at(-1)?.entries.map((e) => [e.programId, e.engineId, e.kind]);
  const inFlight = () => core.engines.map((e) => e.inFlight);
  return { core, enqueue, warm, stale, reservations, errors, plans, lastPlan, inFlight };
}

const summary = (dispatches: { call: QueuedCall; engineId: string; reason: string }[]) => dispatches.map((d) => [d.call.programId, d.engineId, d.reason]);

describe("PoolCore with TAO placement: where calls go", () => {
  it("places a program on the engine holding its cache credit, even when that engine is busier", () => {
    // A is busier (its own queue) and fuller (KV); a program without credit goes to the emptier B.
    const { core, enqueue, warm, lastPlan, inFlight } = setup([{ id: "A", state: { waiting: 3, kvUsage: 0.3 } }, { id: "B" }]);
    warm("prog_cached", "A", 20_000, 1_000);
    enqueue({ programId: "prog_cached", promptTokens: 20_500 }, 1_100);
    enqueue({ programId: "prog_fresh", promptTokens: 500 }, 1_100);
    const round = core.pump(1_100, { plan: true });
    expect(lastPlan()).toEqual([
      ["prog_cached", "A", "dispatch"],
      ["prog_fresh", "B", "dispatch"],
    ]);
    expect(summary(round.dispatches)).toEqual([
      ["prog_cached", "A", "tao-plan"],
      ["prog_fresh", "B", "tao-plan"],
    ]);
    expect(round.needsPlan).toBe(false);
    expect(inFlight()).toEqual([1, 1]);
  });

  it("plans with the KV account admission keeps: what is running counts against an engine's room, and comes back when it ends", () => {
    // Capacity 100k, KV target 90 %: a 60k-token call running on A leaves no room there for a 40k-token program.
    const { core, enqueue, lastPlan } = setup([{ id: "A" }, { id: "B", state: { healthy: false } }]);
    const running = enqueue({ programId: "prog_running", promptTokens: 60_000 }, 0);
    expect(summary(core.pump(0, { plan: true }).dispatches)).toEqual([["prog_running", "A", "tao-plan"]]);
    expect(core.kv.projectedKvTokens("A")).toBe(60_000 + DEFAULT_DISPATCH_SETTINGS.admission!.defaultOutputTokens);
    enqueue({ programId: "prog_waiting", promptTokens: 40_000 }, 10);
    const held = core.pump(20, { plan: true });
    expect(lastPlan()).toEqual([]);
    expect(held).toMatchObject({ dispatches: [], heldPrograms: 1, wakeAt: 10 + SETTINGS.holdLeftOutMs });
    core.attemptEnded(running.callId, { serviceMs: 1_000, outputTokens: 100 }, 30);
    expect(core.kv.projectedKvTokens("A")).toBe(0);
    expect(summary(core.pump(40, { plan: true }).dispatches)).toEqual([["prog_waiting", "A", "tao-plan"]]);
  });

  it("holds a program the plan left out for want of KV while the others go, and routes it once it has waited holdLeftOutMs", () => {
    // The light program's context does not fit any engine's KV, so the plan leaves it out.
    const { core, enqueue, lastPlan } = setup([{ id: "A", maxInFlight: 1 }, { id: "B", state: { healthy: false } }]);
    const heavy = enqueue({ programId: "prog_heavy", serviceMs: 100_000, pathMs: 100_000, promptTokens: 1_000 }, 0);
    enqueue({ programId: "prog_light", promptTokens: 90_000 }, 10);
    const round = core.pump(20, { plan: true });
    expect(lastPlan()?.map(([programId]) => programId)).toEqual(["prog_heavy"]);
    // The light one comes first in the queue's order, but sending it would overfill A's KV: it is held.
    expect(summary(round.dispatches)).toEqual([["prog_heavy", "A", "tao-plan"]]);
    expect(round).toMatchObject({ heldPrograms: 1, wakeAt: 10 + SETTINGS.holdLeftOutMs });
    // Overdue after holdLeftOutMs, it goes by routing, but only where admission's KV account has room:
    // not onto A while the heavy call runs there (that is what overfilled engines and preempted)...
    const overdue = 10 + SETTINGS.holdLeftOutMs;
    core.engine("A")!.maxInFlight = 2;
    expect(core.pump(overdue, { plan: true }).dispatches).toEqual([]);
    // ...and as soon as A is idle (an idle engine always takes one, whatever its size).
    core.attemptEnded(heavy.callId, { serviceMs: 5 }, overdue + 1);
    expect(summary(core.pump(overdue + 1, { plan: true }).dispatches)).toEqual([["prog_light", "A", "long-no-affinity"]]);
  });

  it("lets no call the plan left out overtake a higher-priority call that arrived after the plan", () => {
    const { core, enqueue, lastPlan } = setup([{ id: "A", maxInFlight: 1 }]);
    const blocker = enqueue({ programId: "prog_blocker" }, 0);
    core.pump(0, { plan: true });
    enqueue({ programId: "prog_heavy", serviceMs: 100_000, pathMs: 100_000 }, 0);
    // The engine is full: the plan leaves the heavy program out (it is held until a plan places it).
    core.pump(1, { plan: true });
    expect(lastPlan()).toEqual([]);
    enqueue({ programId: "prog_light" }, 2);
    core.attemptEnded(blocker.callId, { serviceMs: 1 }, 2);
    expect(core.pump(3)).toMatchObject({ dispatches: [], needsPlan: true });
    expect(summary(core.pump(4, { plan: true }).dispatches)).toEqual([["prog_light", "A", "tao-plan"]]);
  });

  it("holds calls that arrived after the plan for the next plan, and asks for one", () => {
    const { core, enqueue, plans } = setup([{ id: "A" }]);
    core.pump(0, { plan: true });
    expect(plans).toHaveLength(0);
    enqueue({ programId: "prog_new" }, 5);
    expect(core.pump(5)).toMatchObject({ dispatches: [], needsPlan: true });
    expect(summary(core.pump(6, { plan: true }).dispatches)).toEqual([["prog_new", "A", "tao-plan"]]);
  });

  it("re-validates a plan before applying it: stale entries are skipped, counted by reason, and re-planned", () => {
    const { core, enqueue, stale, lastPlan } = setup([{ id: "A", maxInFlight: 2 }]);
    const first = enqueue({ programId: "prog_first" }, 0);
    const gone = enqueue({ programId: "prog_gone" }, 0);
    enqueue({ programId: "prog_grows", promptTokens: 1_000 }, 0);
    // The plan places all three; A's two slots take the first two calls in order, the third entry waits (blocked).
    const round = core.pump(1, { plan: true });
    expect(lastPlan()?.map(([programId]) => programId)).toEqual(["prog_first", "prog_gone", "prog_grows"]);
    expect(summary(round.dispatches).map(([programId]) => programId)).toEqual(["prog_first", "prog_gone"]);
    core.attemptEnded(first.callId, { serviceMs: 1 }, 2);
    core.attemptEnded(gone.callId, { serviceMs: 1 }, 2);
    // Before the next plan, the waiting program grows (a second, bigger call): its entry no longer fits what was planned.
    enqueue({ programId: "prog_grows", promptTokens: 9_000 }, 2);
    expect(core.pump(3)).toMatchObject({ dispatches: [], needsPlan: true });
    expect(stale).toEqual(["program-grew"]);
    // Counted once: a skipped entry is not checked again.
    core.pump(4);
    expect(stale).toHaveLength(1);
    expect(summary(core.pump(5, { plan: true }).dispatches)).toEqual([
      ["prog_grows", "A", "tao-plan"],
      ["prog_grows", "A", "tao-plan"],
    ]);
  });

  it("treats an expired plan as no plan", () => {
    const { core, enqueue } = setup([{ id: "A", maxInFlight: 1, state: { inFlight: 1 } }]);
    enqueue({ programId: "prog_late" }, 0);
    core.pump(0, { plan: true });
    core.engine("A")!.inFlight = 0;
    expect(core.wantsPlan(SETTINGS.tao.planner.planTtlMs + 1)).toBe(true);
    expect(core.pump(SETTINGS.tao.planner.planTtlMs + 1)).toMatchObject({ dispatches: [], needsPlan: true });
  });

  it("routes every call by the routing rule while planning fails", () => {
    const { core, enqueue, errors } = setup(Array.from({ length: 255 }, (_, i) => ({ id: `e${String(i).padStart(3, "0")}` })));
    enqueue({ programId: "prog_any" }, 0);
    const round = core.pump(0, { plan: true });
    expect(errors).toHaveLength(1);
    expect(summary(round.dispatches)).toEqual([["prog_any", "e000", "short-least-loaded"]]);
  });
});

describe("PoolCore with TAO placement: reservations", () => {
  function readySoon() {
    const s = setup([{ id: "A" }, { id: "B" }]);
    s.warm("prog_back", "B", 30_000, 1_000);
    // The client says its tool will take 300 ms: within the 1 s readiness horizon.
    s.core.toolEvents("prog_back", [{ type: "tool_started", thread: "main", tool: "bash", expected_duration_ms: 300 }], 1_000, 1_000);
    expect(s.core.pump(1_000, { plan: true }).dispatches).toEqual([]);
    expect(s.lastPlan()).toEqual([["prog_back", "B", "reserve"]]);
    expect(s.reservations).toEqual(["held"]);
    expect(s.inFlight()).toEqual([0, 1]);
    return s;
  }

  it("holds a slot on the program's cache engine, and its next call takes that slot", () => {
    const { core, enqueue, reservations, inFlight } = readySoon();
    enqueue({ programId: "prog_back", promptTokens: 30_500 }, 1_300);
    expect(summary(core.pump(1_300).dispatches)).toEqual([["prog_back", "B", "tao-reserved"]]);
    expect(reservations).toEqual(["held", "used"]);
    // The placeholder became the call: no slot leaked, none counted twice.
    expect(inFlight()).toEqual([0, 1]);
    expect(core.reservationsHeld).toBe(0);
  });

  it("lets a reservation run out when the call does not come, and says when in wakeAt", () => {
    const { core, reservations, inFlight } = readySoon();
    expect(core.pump(1_001).wakeAt).toBe(1_000 + SETTINGS.reservationTtlMs);
    core.pump(1_000 + SETTINGS.reservationTtlMs);
    expect(reservations).toEqual(["held", "expired"]);
    expect(inFlight()).toEqual([0, 0]);
  });

  it("releases a reservation when its program ends", () => {
    const { core, reservations, inFlight } = readySoon();
    core.programEnded("prog_back");
    expect(reservations).toEqual(["held", "released"]);
    expect(inFlight()).toEqual([0, 0]);
    expect(core.signals.inspect("prog_back", 1_100)).toBeUndefined();
  });

  it("reserves on a readiness probe (predicted time passed) only when planned and applied at one instant", () => {
    const s = setup([{ id: "A" }]);
    s.warm("prog_probe", "A", 10_000, 1_000);
    // No tool named: the fallback guess (5 s); asked after that, the predictor answers once ("probe").
    const at = 1_000 + SETTINGS.tao.readiness.fallbackMs + 100;
    s.core.pump(at, { plan: true });
    expect(s.lastPlan()?.map(([, , kind]) => kind)).toEqual(["reserve"]);
    expect(s.reservations).toEqual(["held"]);
  });

  it("counts the held tokens against the engine's free KV in the next plan", () => {
    const { core, enqueue, lastPlan } = readySoon();
    // B keeps 90 % × 100k − 30,256 reserved; a 60k-token program no longer fits there.
    enqueue({ programId: "prog_big", promptTokens: 60_000 }, 1_010);
    core.pump(1_010, { plan: true });
    expect(lastPlan()).toEqual([["prog_big", "A", "dispatch"]]);
  });
});
