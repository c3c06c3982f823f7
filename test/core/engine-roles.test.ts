import { describe, expect, it } from "vitest";
import { PoolCore } from "../../src/core/pool-core.js";
import { metricsSaturated } from "../../src/core/engines.js";
import { EngineRoleBook, validateEngineRoles } from "../../src/core/roles/engine-roles.js";
import { DECODE_HOLD_MAX_MS, pickDecodeEngine } from "../../src/core/roles/decode-placement.js";
import type { EngineRole, RoleSwitchMode } from "../../src/core/roles/roles.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

/* Roles in the pool core (issue 13): where a new call and a disaggregated call's decode go, and switches that drain first or overlap. */

const SETTINGS = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS };

function core(engines: { id: string; role?: EngineRole; capacityTokens?: number; maxInFlight?: number; maxDecodes?: number; switchMode?: RoleSwitchMode }[]) {
  return new PoolCore({ settings: SETTINGS, engines: engines.map((e) => ({ maxInFlight: 8, capacityTokens: 100_000, ...e })) });
}

describe("engine roles in the pool core", () => {
  it("refuses prefill engines without a decode engine", () => {
    expect(() => validateEngineRoles(["prefill", "mixed"])).toThrow(/decode engine/);
    expect(() => new EngineRoleBook([{ id: "P", role: "prefill" }])).toThrow(/decode engine/);
    expect(() => validateEngineRoles(["prefill", "decode", "mixed"])).not.toThrow();
  });

  it("places new calls only on engines that prefill, never on a decode engine", () => {
    const pool = core([{ id: "D1", role: "decode" }, { id: "P1", role: "prefill" }, { id: "D2", role: "decode" }]);
    const calls = Array.from({ length: 6 }, () => makeCall({ promptTokens: 500 }));
    for (const call of calls) pool.enqueue(call, 0);
    const dispatches = pool.pump(0).dispatches;
    expect(dispatches).toHaveLength(6);
    expect(new Set(dispatches.map((d) => d.engineId))).toEqual(new Set(["P1"]));
    // A retry also stays off decode engines.
    const retry = makeCall();
    expect(pool.route(retry, new Set(["P1"]), 0)).toBeUndefined();
  });

  it("puts a call's decode on the decode engine with the most KV room, and gives its slot back once", () => {
    const pool = core([{ id: "P", role: "prefill" }, { id: "D1", role: "decode" }, { id: "D2", role: "decode" }]);
    // D1 already decodes a 40k-token context: D2 has more room.
    const big = makeCall({ promptTokens: 40_000 });
    expect(pool.placeDecode(big, new Set())).toBe("D1");
    const next = makeCall({ promptTokens: 1_000 });
    expect(pool.placeDecode(next, new Set())).toBe("D2");
    expect(pool.placeDecode(next, new Set())).toBeUndefined();
    expect(pool.decodingOn(next.callId)).toBe("D2");
    pool.decodeEnded(next.callId, { serviceMs: 10, outputTokens: 5 }, 1);
    pool.decodeEnded(next.callId, { serviceMs: 10, outputTokens: 5 }, 2);
    expect(pool.engine("D2")?.inFlight).toBe(0);
    expect(pool.engine("D1")?.inFlight).toBe(1);
    expect(pool.kv.projectedKvTokens("D2")).toBe(0);
    // Excluded (it refused the handoff) or unhealthy engines are not chosen.
    expect(pool.placeDecode(makeCall(), new Set(["D2"]))).toBe("D1");
  });

  it("chooses no decode engine when none is healthy, and the least loaded when all are at their cap", () => {
    const engine = (id: string, inFlight: number, healthy = true) => ({ id, healthy, inFlight, maxInFlight: 2, waiting: 0, kvUsage: 0 });
    expect(pickDecodeEngine([{ engine: engine("A", 0, false), capacityTokens: 10, projectedTokens: 0 }])).toBeUndefined();
    expect(
      pickDecodeEngine([
        { engine: engine("A", 2), capacityTokens: 1_000, projectedTokens: 900 },
        { engine: engine("B", 2), capacityTokens: 1_000, projectedTokens: 100 },
      ])?.id,
    ).toBe("B");
    expect(
      pickDecodeEngine([
        { engine: engine("A", 1), capacityTokens: 1_000, projectedTokens: 900 },
        { engine: engine("B", 2), capacityTokens: 1_000, projectedTokens: 100 },
      ])?.id,
    ).toBe("A");
  });

  it("holds a decode while every decode engine is at its decode cap or backed up, until one admits it or the hold reaches its bound", () => {
    const pool = core([
      { id: "P", role: "prefill" },
      { id: "D1", role: "decode", maxInFlight: 8, maxDecodes: 1 },
      { id: "D2", role: "decode", maxInFlight: 1, maxDecodes: 3, capacityTokens: 10_000 },
    ]);
    const first = makeCall({ promptTokens: 500, maxTokens: 100 });
    const second = makeCall({ promptTokens: 7_000, maxTokens: 100 });
    expect(pool.admitDecode(first, new Set(), 0)).toEqual({ engineId: "D1" });
    // D1 is at its decode cap (one, though its count cap for new calls is eight): D2 takes it.
    expect(pool.admitDecode(second, new Set(), 0)).toEqual({ engineId: "D2" });
    // D2's account projects 7,100 tokens plus 6,100 more, past its KV: a decode engine takes blocks as they free, so that is no hold,
    // and its count cap for new calls (one) is not its decode cap (three).
    const third = makeCall({ promptTokens: 6_000, maxTokens: 100 });
    expect(pool.admitDecode(third, new Set(), 0)).toEqual({ engineId: "D2" });
    // D2 reports a backlog of its own (its waiting queue past maxEngineWaiting): held, under that reason, until the bound.
    pool.engineReadings([{ id: "D2", healthy: true, waiting: SETTINGS.saturation.maxEngineWaiting + 1, kvUsage: 0.9 }], 1);
    const fourth = makeCall({ promptTokens: 6_000, maxTokens: 100 });
    expect(pool.admitDecode(fourth, new Set(["D1"]), 0)).toEqual({ held: "engine-backlog" });
    // With D1 at its cap too, the hold is counted under the more binding reason.
    expect(pool.admitDecode(fourth, new Set(), 0)).toEqual({ held: "count" });
    expect(pool.decodingOn(fourth.callId)).toBeUndefined();
    expect(pool.admitDecode(fourth, new Set(), DECODE_HOLD_MAX_MS - 1)).toEqual({ held: "count" });
    // Capacity appears (D1's decode ended): the held decode is admitted there.
    pool.decodeEnded(first.callId, { serviceMs: 10, outputTokens: 100 }, 2);
    expect(pool.admitDecode(fourth, new Set(), 5)).toEqual({ engineId: "D1" });
    // D1 at its cap and D2 backed up: held past the bound, it goes anyway, to the engine below its decode cap, and placeDecode never holds.
    const fifth = makeCall({ promptTokens: 6_000, maxTokens: 100 });
    expect(pool.admitDecode(fifth, new Set(), 0)).toEqual({ held: "count" });
    expect(pool.admitDecode(fifth, new Set(), DECODE_HOLD_MAX_MS)).toEqual({ engineId: "D2" });
    expect(pool.engine("D2")?.inFlight).toBe(3);
    expect(pool.placeDecode(makeCall(), new Set())).toBeDefined();
    // No healthy decode engine: nothing to hold for.
    expect(pool.admitDecode(makeCall(), new Set(["D1", "D2"]), 0)).toBeUndefined();
  });

  it("keeps a program's long call on its prefill engine while that engine's own queue is long (its normal state), not on a mixed engine", () => {
    const longCall = () => makeCall({ promptTokens: 12_000, affinityEngine: "A" });
    const backlog = { healthy: true, waiting: SETTINGS.saturation.maxEngineWaiting + 6, kvUsage: 0.2 };
    // Prefill engines: A's ten waiting prompts do not send the call to B, where its prefix is not cached.
    const split = core([{ id: "A", role: "prefill" }, { id: "B", role: "prefill" }, { id: "D", role: "decode" }]);
    split.engineReadings([{ id: "A", ...backlog }, { id: "B", healthy: true, waiting: 0, kvUsage: 0 }], 0);
    split.enqueue(longCall(), 0);
    expect(split.pump(0).dispatches.map((d) => d.engineId)).toEqual(["A"]);
    // Mixed engines: a queue past maxEngineWaiting is a backlog, and the call goes elsewhere.
    const mixed = core([{ id: "A" }, { id: "B" }]);
    mixed.engineReadings([{ id: "A", ...backlog }, { id: "B", healthy: true, waiting: 0, kvUsage: 0 }], 0);
    mixed.enqueue(longCall(), 0);
    expect(mixed.pump(0).dispatches.map((d) => d.engineId)).toEqual(["B"]);
  });

  it("counts a backlog again on an engine that switched from prefill to decode: its decodes are held, not piled on its queue", () => {
    const pool = core([{ id: "P1", role: "prefill", switchMode: "overlap" }, { id: "P2", role: "prefill" }, { id: "D", role: "decode" }]);
    const backlog = { healthy: true, waiting: SETTINGS.saturation.maxEngineWaiting + 6, kvUsage: 0.2 };
    pool.engineReadings([{ id: "P1", ...backlog }], 0);
    // As a prefill engine its queue is its normal state: a new call still goes to it.
    pool.enqueue(makeCall({ promptTokens: 12_000, affinityEngine: "P1" }), 0);
    expect(pool.pump(0).dispatches.map((d) => d.engineId)).toEqual(["P1"]);
    expect(pool.startRoleSwitch({ engineId: "P1", from: "prefill", to: "decode", reason: "test" }, 1)).toBe(true);
    // As a decode engine the same queue is a backlog: the decode is held (D refused it), with no pump in between.
    expect(pool.admitDecode(makeCall(), new Set(["D"]), 0)).toEqual({ held: "engine-backlog" });
    expect(metricsSaturated(pool.engine("P1")!, SETTINGS.saturation)).toBe(true);
  });

  it("recomputes a failed handoff on a mixed engine first, else on a decode engine", () => {
    const pool = core([{ id: "P", role: "prefill" }, { id: "D", role: "decode" }, { id: "M", role: "mixed" }]);
    const call = makeCall();
    expect(pool.routeRecompute(call, new Set(["D"]))?.engineId).toBe("M");
    pool.attemptEnded(call.callId, { serviceMs: 1 }, 1);
    const other = makeCall();
    expect(pool.routeRecompute(other, new Set(["D", "M"]))).toBeUndefined();
    const split = core([{ id: "P", role: "prefill" }, { id: "D", role: "decode" }]);
    expect(split.routeRecompute(makeCall(), new Set())?.engineId).toBe("D");
  });

  it("leaves a pool of mixed engines exactly as it was: every engine takes new calls", () => {
    const pool = core([{ id: "A" }, { id: "B" }]);
    expect(pool.roles.split).toBe(false);
    for (let i = 0; i < 4; i++) pool.enqueue(makeCall(), 0);
    expect(new Set(pool.pump(0).dispatches.map((d) => d.engineId))).toEqual(new Set(["A", "B"]));
  });

  it("drains a switching engine: nothing new goes to it, its calls finish, then it takes its new role", () => {
    const pool = core([{ id: "P1", role: "prefill" }, { id: "P2", role: "prefill" }, { id: "D", role: "decode" }]);
    const first = makeCall();
    pool.enqueue(first, 0);
    const [dispatch] = pool.pump(0).dispatches;
    const busy = dispatch!.engineId;
    const idle = busy === "P1" ? "P2" : "P1";
    expect(pool.startRoleSwitch({ engineId: busy, from: "prefill", to: "decode", reason: "test" }, 1)).toBe(true);
    expect(pool.roleStates().find((s) => s.id === busy)).toMatchObject({ role: "prefill", switching: true, load: 1 });
    // The other prefill engine cannot switch now: it is the last one taking prefills.
    expect(pool.startRoleSwitch({ engineId: idle, from: "prefill", to: "decode", reason: "test" }, 1)).toBe(false);
    const later = Array.from({ length: 3 }, () => makeCall());
    for (const call of later) pool.enqueue(call, 2);
    expect(pool.pump(2).dispatches.map((d) => d.engineId)).toEqual([idle, idle, idle]);
    // Nor does a decode go to it while it drains.
    expect(pool.placeDecode(makeCall(), new Set(["D"]))).toBeUndefined();
    expect(pool.takeFinishedRoleSwitches()).toEqual([]);
    pool.attemptEnded(first.callId, { serviceMs: 5 }, 10);
    expect(pool.takeFinishedRoleSwitches()).toEqual([{ engineId: busy, from: "prefill", to: "decode", reason: "test", mode: "drain", atMs: 10 }]);
    expect(pool.roles.role(busy)).toBe("decode");
    expect(pool.placeDecode(makeCall({ promptTokens: 1 }), new Set(["D"]))).toBe(busy);
  });

  it("switches an idle engine at once, and refuses a switch from a role it does not have", () => {
    const pool = core([{ id: "P", role: "prefill" }, { id: "D1", role: "decode" }, { id: "D2", role: "decode" }]);
    expect(pool.startRoleSwitch({ engineId: "D1", from: "prefill", to: "decode", reason: "x" }, 0)).toBe(false);
    expect(pool.startRoleSwitch({ engineId: "D1", from: "decode", to: "prefill", reason: "x" }, 3)).toBe(true);
    expect(pool.takeFinishedRoleSwitches()).toMatchObject([{ engineId: "D1", to: "prefill", atMs: 3 }]);
    expect(pool.roles.role("D1")).toBe("prefill");
  });
});

describe("overlapping role switches (an engine that serves both sides)", () => {
  it("gives a prefill engine switched to decode decodes at once and no new prefill; its prefill in flight finishes and completes the switch", () => {
    const pool = core([{ id: "P1", role: "prefill", switchMode: "overlap" }, { id: "P2", role: "prefill" }, { id: "D", role: "decode" }]);
    const first = makeCall();
    pool.enqueue(first, 0);
    // P1 is listed first: the one call goes there.
    expect(pool.pump(0).dispatches.map((d) => d.engineId)).toEqual(["P1"]);
    expect(pool.startRoleSwitch({ engineId: "P1", from: "prefill", to: "decode", reason: "test" }, 1)).toBe(true);
    // It counts as a decode engine from now on, not draining, and cannot be moved again while its prefill runs.
    expect(pool.roleStates().find((s) => s.id === "P1")).toMatchObject({ role: "decode", switching: false, finishing: true, load: 1 });
    expect(pool.startRoleSwitch({ engineId: "P1", from: "decode", to: "prefill", reason: "back" }, 1)).toBe(false);
    // New-role work right after the switch: a decode goes to it (D excluded: it refused the handoff).
    const decoded = makeCall({ promptTokens: 2_000 });
    expect(pool.placeDecode(decoded, new Set(["D"]))).toBe("P1");
    // None of the old role's: new calls are prefilled on P2 only.
    const later = Array.from({ length: 3 }, () => makeCall());
    for (const call of later) pool.enqueue(call, 2);
    expect(pool.pump(2).dispatches.map((d) => d.engineId)).toEqual(["P2", "P2", "P2"]);
    expect(pool.takeFinishedRoleSwitches()).toEqual([]);
    // The prefill in flight finishes where it is: its slot comes back once, and the switch is complete (the decode on it does not hold it up).
    pool.attemptEnded(first.callId, { serviceMs: 5 }, 10);
    pool.attemptEnded(first.callId, { serviceMs: 5 }, 11);
    expect(pool.takeFinishedRoleSwitches()).toEqual([{ engineId: "P1", from: "prefill", to: "decode", reason: "test", mode: "overlap", atMs: 10 }]);
    expect(pool.engine("P1")?.inFlight).toBe(1);
    expect(pool.roleStates().find((s) => s.id === "P1")).toMatchObject({ role: "decode", switching: false, finishing: false });
    pool.decodeEnded(decoded.callId, { serviceMs: 5, outputTokens: 10 }, 20);
    expect(pool.engine("P1")?.inFlight).toBe(0);
    expect(pool.takeFinishedRoleSwitches()).toEqual([]);
  });

  it("gives a decode engine switched to prefill new calls at once while its decodes run on; none is lost", () => {
    const pool = core([{ id: "P", role: "prefill" }, { id: "D1", role: "decode", switchMode: "overlap" }, { id: "D2", role: "decode" }]);
    const decodes = Array.from({ length: 3 }, () => makeCall({ promptTokens: 1_000 }));
    for (const call of decodes) expect(pool.placeDecode(call, new Set(["D2"]))).toBe("D1");
    expect(pool.startRoleSwitch({ engineId: "D1", from: "decode", to: "prefill", reason: "test" }, 5)).toBe(true);
    expect(pool.roles.role("D1")).toBe("prefill");
    // New calls go to both prefilling engines at once (the old book gave D1 nothing until its decodes were done).
    const calls = Array.from({ length: 4 }, () => makeCall());
    for (const call of calls) pool.enqueue(call, 6);
    expect(new Set(pool.pump(6).dispatches.map((d) => d.engineId))).toEqual(new Set(["P", "D1"]));
    // No decode goes to it any more; its old decodes are still where they were.
    expect(pool.placeDecode(makeCall(), new Set(["D2"]))).toBeUndefined();
    expect(decodes.map((c) => pool.decodingOn(c.callId))).toEqual(["D1", "D1", "D1"]);
    // The switch is complete when the last old decode left, not before, and a new call ending does not complete it.
    pool.decodeEnded(decodes[0]!.callId, { serviceMs: 1 }, 7);
    pool.decodeEnded(decodes[1]!.callId, { serviceMs: 1 }, 8);
    expect(pool.takeFinishedRoleSwitches()).toEqual([]);
    pool.decodeEnded(decodes[2]!.callId, { serviceMs: 1 }, 9);
    expect(pool.takeFinishedRoleSwitches()).toMatchObject([{ engineId: "D1", from: "decode", to: "prefill", mode: "overlap", atMs: 9 }]);
    // Every call is still accounted for: the new ones on D1 hold its slots.
    expect(pool.engine("D1")?.inFlight).toBe(pool.callsOn("D1").prefill);
    expect(pool.callsOn("D1").decode ?? 0).toBe(0);
  });

  it("completes an overlapping switch of an idle engine at once, and keeps the last engine of a side", () => {
    const pool = core([{ id: "P", role: "prefill", switchMode: "overlap" }, { id: "D1", role: "decode", switchMode: "overlap" }, { id: "D2", role: "decode", switchMode: "overlap" }]);
    expect(pool.startRoleSwitch({ engineId: "P", from: "prefill", to: "decode", reason: "x" }, 1)).toBe(false);
    expect(pool.startRoleSwitch({ engineId: "D1", from: "decode", to: "prefill", reason: "x" }, 2)).toBe(true);
    expect(pool.takeFinishedRoleSwitches()).toMatchObject([{ engineId: "D1", mode: "overlap", atMs: 2 }]);
    // D2 is now the last decode engine.
    expect(pool.startRoleSwitch({ engineId: "D2", from: "decode", to: "prefill", reason: "x" }, 3)).toBe(false);
  });

  it("refuses a switch mode it does not know", () => {
    expect(() => new EngineRoleBook([{ id: "P", role: "prefill" }, { id: "D", role: "decode", switchMode: "restart" as RoleSwitchMode }])).toThrow(/switch mode/);
  });
});
