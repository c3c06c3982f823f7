import { describe, expect, it } from "vitest";
import { DEFAULT_RATIO_CONTROLLER, RatioRoleController, RoleDemandMeter, type RoleEngineState, type RoleSwitch, type RoleWorkModel } from "../../src/core/roles/index.js";
import { RoleControlLoop, type RoleSwitchTarget } from "../../src/pool/role-control.js";

const MODEL: RoleWorkModel = { decodeBaseMs: 10, perTokenMs: 0.1, perContextTokenMs: 0.001, perSequenceMs: 0.05, batchSequences: 100 };
const ROUND_MS = 10_000;

/** One prefill engine and three decode engines; switches are accepted unless `refuse`. */
function pool(refuse = false) {
  const engines: RoleEngineState[] = [
    { id: "e0", role: "prefill", switching: false, load: 0 },
    { id: "e1", role: "decode", switching: false, load: 2 },
    { id: "e2", role: "decode", switching: false, load: 1 },
    { id: "e3", role: "decode", switching: false, load: 3 },
  ];
  const asked: RoleSwitch[] = [];
  const target: RoleSwitchTarget = {
    roleStates: () => engines,
    roleReadings: () => ({ decodeKvTokens: 0, prefillQueue: 0, decodeKvUsage: 0.1 }),
    startRoleSwitch: (s) => {
      asked.push(s);
      if (refuse) return false;
      const engine = engines.find((e) => e.id === s.engineId);
      if (engine !== undefined) engine.switching = true;
      return true;
    },
  };
  return { engines, asked, target };
}

describe("RoleControlLoop", () => {
  it("moves a decode engine to prefill after the controller's sustain rounds of prefill-bound demand", () => {
    const { asked, target } = pool();
    let now = 0;
    const meter = new RoleDemandMeter(MODEL, now);
    const rounds: number[] = [];
    const loop = new RoleControlLoop({
      controller: new RatioRoleController({ decodeKvTokens: 400_000 }, { cooldownMs: 0 }),
      meter,
      target,
      clock: { now: () => now },
      roundMs: ROUND_MS,
      onRound: ({ started }) => rounds.push(started.length),
    });
    const sustain = DEFAULT_RATIO_CONTROLLER.sustainRounds;
    for (let round = 0; round <= sustain; round++) {
      // Two engines' worth of prefill each round (20,000 engine-ms over 10 s), almost no decode.
      for (let i = 0; i < 20; i++) meter.prefillQueued(`r${round}c${i}`, 10_000, 0);
      for (let i = 0; i < 20; i++) meter.prefillDone(`r${round}c${i}`, 500);
      meter.decoded(100, 1_000, 20);
      now += ROUND_MS;
      loop.round();
    }
    // The first rounds build the streak, the sustain-th switches; the least-loaded decode engine goes first.
    expect(rounds.slice(0, sustain - 1)).toEqual(Array.from({ length: sustain - 1 }, () => 0));
    expect(rounds[sustain - 1]).toBeGreaterThan(0);
    expect(asked[0]).toMatchObject({ engineId: "e2", from: "decode", to: "prefill" });
    // The engine is draining now: the controller starts nothing more meanwhile.
    expect(rounds[sustain]).toBe(0);
  });

  it("reports a switch the pool could not start as not started", () => {
    const { asked, target } = pool(true);
    let now = 0;
    const meter = new RoleDemandMeter(MODEL, now);
    const started: number[] = [];
    const loop = new RoleControlLoop({
      controller: new RatioRoleController({ decodeKvTokens: 400_000 }, { cooldownMs: 0, sustainRounds: 1 }),
      meter,
      target,
      clock: { now: () => now },
      roundMs: ROUND_MS,
      onRound: (round) => started.push(round.started.length),
    });
    for (let i = 0; i < 20; i++) meter.prefillQueued(`c${i}`, 10_000, 0);
    now += ROUND_MS;
    const decision = loop.round();
    expect(decision.action).toBe("switch");
    expect(asked.length).toBeGreaterThan(0);
    expect(started).toEqual([0]);
  });

  it("refuses a non-positive round", () => {
    const { target } = pool();
    expect(
      () =>
        new RoleControlLoop({
          controller: new RatioRoleController({ decodeKvTokens: 1 }),
          meter: new RoleDemandMeter(MODEL, 0),
          target,
          clock: { now: () => 0 },
          roundMs: 0,
        }),
    ).toThrow(RangeError);
  });
});
