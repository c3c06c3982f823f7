import { describe, expect, it } from "vitest";
import type { EngineState } from "../../../src/core/engines.js";
import { ProgramQueue } from "../../../src/core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS, DEFAULT_SATURATION_SETTINGS } from "../../../src/core/settings.js";
import type { StaleReason } from "../../../src/core/tao/plan-validation.js";
import { planPlacement, type TaoPlan, type TaoPlanEntry } from "../../../src/core/tao/planner.js";
import { ReservationBook, type ReservationOutcome } from "../../../src/core/tao/reservation-book.js";
import { DEFAULT_TAO_SETTINGS } from "../../../src/core/tao/settings.js";
import type { TaoSnapshot } from "../../../src/core/tao/snapshot.js";
import { type LiveSnapshot, reservingPrograms, TaoPump } from "../../../src/core/tao/tao-pump.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "../calls.js";

const DISPATCH = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS };
const TTL = 1_000;
const HOLD = 10_000;

function engine(id: string, overrides: Partial<EngineState> = {}): EngineState {
  return { id, healthy: true, inFlight: 0, maxInFlight: 4, waiting: 0, kvUsage: 0, ...overrides };
}

function entry(programId: string, engineId: string, kind: TaoPlanEntry["kind"] = "dispatch"): TaoPlanEntry {
  return { programId, engineId, kind, tokens: 100, units: 1, credit: 0, ready: true };
}

/** Programs queued (and `between`, ready between calls) on engines with room for all. */
function snapshotOf(at: number, queued: readonly string[], between: readonly string[] = [], engines = ["A", "B"]): TaoSnapshot {
  return {
    at,
    programs: [...queued.map((programId) => ({ programId, tokens: 100, queued: true, ready: true })), ...between.map((programId) => ({ programId, tokens: 100, queued: false, ready: true }))],
    engines: engines.map((engineId) => ({ engineId, freeTokens: 1_000_000 })),
  };
}

/** A real plan made from `snapshot`, with the entries the test decides. */
function planOf(snapshot: TaoSnapshot, entries: TaoPlanEntry[]): TaoPlan {
  return { ...planPlacement(snapshot, DEFAULT_TAO_SETTINGS.planner), entries };
}

const live =
  (at: number, between: readonly string[] = []): LiveSnapshot =>
  (byProgram, pending) =>
    snapshotOf(at, [...byProgram.keys()], between.filter((p) => reservingPrograms(byProgram, pending).has(p)));

function queueOf(...calls: [callId: string, programId: string, enqueuedAt: number][]): ProgramQueue {
  const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
  for (const [callId, programId, enqueuedAt] of calls) queue.enqueue(makeCall({ callId, programId, enqueuedAt }));
  return queue;
}

function setup(holdLeftOutMs = HOLD) {
  const outcomes: ReservationOutcome[] = [];
  const stale: StaleReason[] = [];
  const book = new ReservationBook((outcome) => outcomes.push(outcome));
  const pump = new TaoPump({ dispatch: DISPATCH, reservationTtlMs: TTL, holdLeftOutMs }, book, { onStale: (reason) => stale.push(reason) });
  return { book, pump, outcomes, stale };
}

describe("TaoPump", () => {
  it("walks the queue in priority order: plan entries to their engine, left-out programs held, new ones wait", () => {
    const { pump } = setup();
    const queue = queueOf(["p1", "p", 1], ["q1", "q", 2], ["s1", "s", 3]);
    const snapshot = snapshotOf(5, ["p", "q", "s"]);
    pump.install(planOf(snapshot, [entry("p", "B"), entry("s", "B")]), snapshot);
    // r arrives after the plan; it sits between q and s in the queue's order.
    queue.enqueue(makeCall({ callId: "r1", programId: "r", enqueuedAt: 2.5 }));
    const engines = [engine("A"), engine("B")];
    const result = pump.pump(queue, engines, 6, live(6));
    // q was left out (no KV room for it): held, and the walk goes on to r, which stops it.
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId, d.reason])).toEqual([["p1", "B", "tao-plan"]]);
    expect(result).toMatchObject({ needsPlan: true, held: 1, holdUntil: 2 + HOLD });
    expect(queue.size).toBe(3);
  });

  it("lets the programs after a held one go on", () => {
    const { pump } = setup();
    const queue = queueOf(["p1", "p", 1], ["q1", "q", 2]);
    const snapshot = snapshotOf(5, ["p", "q"]);
    pump.install(planOf(snapshot, [entry("q", "A")]), snapshot);
    const result = pump.pump(queue, [engine("A"), engine("B")], 6, live(6));
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId, d.reason])).toEqual([["q1", "A", "tao-plan"]]);
    // Nothing was freed since the plan: the same plan would leave p out again.
    expect(result).toMatchObject({ needsPlan: false, held: 1, holdUntil: 1 + HOLD });
  });

  it("asks for a plan once KV is freed while a program is held", () => {
    const { book, pump } = setup();
    const queue = queueOf(["p1", "p", 1]);
    const snapshot = snapshotOf(5, ["p"]);
    pump.install(planOf(snapshot, []), snapshot);
    expect(pump.pump(queue, [engine("A")], 6, live(6))).toMatchObject({ needsPlan: false, held: 1 });
    book.callEnded();
    expect(pump.pump(queue, [engine("A")], 7, live(7))).toMatchObject({ needsPlan: true, held: 1 });
  });

  it("routes a held program once it has waited holdLeftOutMs", () => {
    const { pump } = setup();
    const queue = queueOf(["p1", "p", 1]);
    const snapshot = snapshotOf(5, ["p"]);
    const plan = { ...planOf(snapshot, []), validUntil: 1 + HOLD + 1 };
    pump.install(plan, snapshot);
    expect(pump.pump(queue, [engine("A")], 1 + HOLD - 1, live(1 + HOLD - 1)).dispatches).toEqual([]);
    const result = pump.pump(queue, [engine("A")], 1 + HOLD, live(1 + HOLD));
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId])).toEqual([["p1", "A"]]);
    expect(result).toMatchObject({ held: 0, holdUntil: undefined });
  });

  it("routes a left-out program at once when one of its calls is promoted (anti-starvation)", () => {
    const { pump } = setup();
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    // ATLAS value 5 s (the last level) and 20 s already waited: 20 / 5 = 4 = β, starving from t = 1.
    queue.enqueue(makeCall({ callId: "p1", programId: "p", enqueuedAt: 0, pathMs: 5_000, waitMs: 20_000 }));
    const snapshot = snapshotOf(5, ["p"]);
    pump.install(planOf(snapshot, []), snapshot);
    const result = pump.pump(queue, [engine("A")], 6, live(6));
    expect(result.dispatches.map((d) => [d.call.callId, d.promoted])).toEqual([["p1", true]]);
  });

  it("routes every left-out program at once with holdLeftOutMs 0", () => {
    const { pump } = setup(0);
    const queue = queueOf(["p1", "p", 1], ["q1", "q", 2]);
    const snapshot = snapshotOf(5, ["p", "q"]);
    pump.install(planOf(snapshot, [entry("q", "B")]), snapshot);
    const result = pump.pump(queue, [engine("A"), engine("B")], 6, live(6));
    expect(result.dispatches.map((d) => [d.call.callId, d.reason.startsWith("tao-")])).toEqual([
      ["p1", false],
      ["q1", true],
    ]);
    expect(result).toMatchObject({ held: 0, holdUntil: undefined });
  });

  it("rejects a negative or NaN holdLeftOutMs", () => {
    const book = new ReservationBook();
    expect(() => new TaoPump({ dispatch: DISPATCH, reservationTtlMs: TTL, holdLeftOutMs: -1 }, book)).toThrow(RangeError);
    expect(() => new TaoPump({ dispatch: DISPATCH, reservationTtlMs: TTL, holdLeftOutMs: Number.NaN }, book)).toThrow(RangeError);
  });

  it("stops the walk at a stale entry and reports it", () => {
    const { pump, stale } = setup();
    const queue = queueOf(["p1", "p", 1], ["q1", "q", 2]);
    const snapshot = snapshotOf(5, ["p", "q"], [], ["A", "B", "C"]);
    pump.install(planOf(snapshot, [entry("p", "C"), entry("q", "A")]), snapshot);
    // Engine C is gone by the time the plan applies.
    const result = pump.pump(queue, [engine("A"), engine("B")], 6, live(6));
    expect(stale).toEqual(["engine-gone"]);
    expect(result.dispatches).toEqual([]);
    expect(result.needsPlan).toBe(true);
  });

  it("holds a reserve entry's slot, and the program's call takes it first when it arrives", () => {
    const { book, pump, outcomes } = setup();
    const queue = queueOf(["p1", "p", 1]);
    const snapshot = snapshotOf(5, ["p"], ["x"]);
    pump.install(planOf(snapshot, [entry("p", "A"), entry("x", "B", "reserve")]), snapshot);
    const engines = [engine("A"), engine("B", { inFlight: 3 })];
    pump.pump(queue, engines, 6, live(6, ["x"]));
    expect(book.has("x")).toBe(true);
    expect(book.tokensOn("B")).toBe(100);
    expect(engines.map((e) => e.inFlight)).toEqual([1, 4]);

    // B is full (the placeholder took its last slot), yet x's call goes there.
    queue.enqueue(makeCall({ callId: "x1", programId: "x", enqueuedAt: 7 }));
    const result = pump.pump(queue, engines, 8, live(8));
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId, d.reason])).toEqual([["x1", "B", "tao-reserved"]]);
    expect(engines.map((e) => e.inFlight)).toEqual([1, 4]);
    expect(outcomes).toEqual(["held", "used"]);
    expect(book.size).toBe(0);
  });

  it("routes every call after a planning failure, and asks for a plan when none is in force", () => {
    const { pump } = setup();
    const queue = queueOf(["p1", "p", 1]);
    expect(pump.pump(queue, [engine("A")], 1, live(1))).toEqual({ dispatches: [], needsPlan: true, held: 0, holdUntil: undefined });
    pump.fail();
    const result = pump.pump(queue, [engine("A")], 2, live(2));
    expect(result.dispatches.map((d) => [d.call.callId, d.engineId])).toEqual([["p1", "A"]]);
    expect(pump.failed).toBe(true);
  });

  it("drops an expired plan", () => {
    const { pump } = setup();
    const queue = queueOf(["p1", "p", 1]);
    const snapshot = snapshotOf(5, ["p"]);
    const plan = planOf(snapshot, [entry("p", "A")]);
    pump.install(plan, snapshot);
    expect(pump.pump(queue, [engine("A")], plan.validUntil + 1, live(plan.validUntil + 1))).toEqual({ dispatches: [], needsPlan: true, held: 0, holdUntil: undefined });
    expect(pump.plan).toBeUndefined();
  });
});

describe("ReservationBook", () => {
  it("frees a reservation's slot when its ttl runs out", () => {
    const outcomes: ReservationOutcome[] = [];
    const book = new ReservationBook((outcome) => outcomes.push(outcome));
    const a = engine("A");
    expect(book.hold("x", a, 500, 0, TTL, DEFAULT_SATURATION_SETTINGS)).toBe(true);
    expect(book.hold("x", a, 500, 0, TTL, DEFAULT_SATURATION_SETTINGS)).toBe(false);
    expect(book.hold("y", a, 500, 0, 0, DEFAULT_SATURATION_SETTINGS)).toBe(false);
    expect(a.inFlight).toBe(1);
    const byId = new Map([["A", a]]);
    expect(book.expire(TTL - 1, byId)).toBe(0);
    expect(book.expire(TTL, byId)).toBe(1);
    expect(a.inFlight).toBe(0);
    expect(outcomes).toEqual(["held", "expired"]);
  });

  it("counts KV used as the larger of the scraped figure and the account's committed tokens plus reservations, against the KV target", () => {
    const book = new ReservationBook();
    const a = engine("A", { kvUsage: 0.1 });
    let committed = 0;
    const saturation = { ...DEFAULT_SATURATION_SETTINGS, maxKvUsage: Infinity };
    const free = () => book.engineViews([a], () => ({ capacityTokens: 10_000, committedTokens: committed }), 1, saturation)[0]?.freeTokens;
    expect(free()).toBe(9_000);
    committed = 3_000;
    expect(free()).toBe(7_000);
    book.hold("x", a, 1_000, 0, TTL, saturation);
    expect(book.tokensOn("A")).toBe(1_000);
    expect(free()).toBe(6_000);
    // The target caps what may be filled: at 90 %, 1,000 tokens less.
    expect(book.engineViews([a], () => ({ capacityTokens: 10_000, committedTokens: committed }), 0.9, saturation)[0]?.freeTokens).toBe(5_000);
    committed = 0;
    book.release("x", new Map([["A", a]]));
    expect(free()).toBe(9_000);
  });
});
