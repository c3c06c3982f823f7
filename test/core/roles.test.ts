import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_RATIO_CONTROLLER,
  DEFAULT_ROLE_ROUND_MS,
  type RoleCapacity,
  type RoleController,
  type RoleDemand,
  RoleDemandMeter,
  type RoleEngineState,
  type RoleSwitch,
  type RoleSwitchMode,
  type RoleWorkModel,
  RatioRoleController,
  ThresholdRoleController,
} from "../../src/core/roles/index.js";

/*
 * Issue 13: the role controllers' decisions on synthetic demand curves. A tiny driver
 * plays a pool of split engines: each round (every 10 s unless told) it hands the
 * controller the demand of that moment and starts the switches it asks for. A draining
 * engine takes its new role 5 s later; an overlapping one takes it at once and finishes
 * its old role's calls for 5 s more (not to be moved again meanwhile).
 */

/** One decode engine holds 400k tokens of KV. */
const CAPACITY: RoleCapacity = { decodeKvTokens: 400_000 };
const ROUND_MS = 10_000;
const DRAIN_MS = 5_000;

/** Demand worth `prefillEngines` and `decodeEngines` engines busy the whole time. */
const demand = (prefillEngines: number, decodeEngines: number, over: Partial<RoleDemand> = {}): RoleDemand => ({
  prefillWorkMsPerSec: prefillEngines * 1_000,
  prefillBacklogMs: 0,
  decodeWorkMsPerSec: decodeEngines * 1_000,
  decodeKvTokens: 0,
  prefillQueue: 0,
  decodeKvUsage: 0.5,
  ttftP95Ms: undefined,
  itlMs: undefined,
  ...over,
});

interface Played {
  switches: (RoleSwitch & { at: number })[];
  /** Prefill engines after each round. */
  prefillEngines: number[];
}

interface PlayOptions {
  roundMs?: number;
  mode?: RoleSwitchMode;
}

function play(controller: RoleController, start: { prefill: number; decode: number }, rounds: number, demandAt: (round: number) => RoleDemand, options: PlayOptions = {}): Played {
  const roundMs = options.roundMs ?? ROUND_MS;
  const engines: (RoleEngineState & { readyAt?: number; next?: "prefill" | "decode" })[] = [
    ...Array.from({ length: start.prefill }, (_, i) => ({ id: `p${i}`, role: "prefill" as const, switching: false, load: i })),
    ...Array.from({ length: start.decode }, (_, i) => ({ id: `d${i}`, role: "decode" as const, switching: false, load: i })),
  ];
  const played: Played = { switches: [], prefillEngines: [] };
  for (let round = 0; round < rounds; round++) {
    const now = round * roundMs;
    for (const engine of engines) {
      if (engine.switching && engine.readyAt !== undefined && now >= engine.readyAt && engine.next) {
        engine.role = engine.next;
        engine.switching = false;
      }
      if (engine.finishing === true && engine.readyAt !== undefined && now >= engine.readyAt) engine.finishing = false;
    }
    const decision = controller.decide(engines, demandAt(round), now);
    for (const roleSwitch of decision.action === "switch" ? decision.switches : []) {
      const engine = engines.find((e) => e.id === roleSwitch.engineId);
      if (!engine) throw new Error(`controller named an unknown engine ${roleSwitch.engineId}`);
      expect(engine.role).toBe(roleSwitch.from);
      expect(engine.switching).toBe(false);
      expect(engine.finishing === true).toBe(false);
      engine.readyAt = now + DRAIN_MS;
      if (options.mode === "overlap") {
        engine.role = roleSwitch.to;
        engine.finishing = true;
      } else {
        engine.switching = true;
        engine.next = roleSwitch.to;
      }
      played.switches.push({ ...roleSwitch, at: now });
    }
    played.prefillEngines.push(engines.filter((e) => e.role === "prefill" && !e.switching).length);
  }
  return played;
}

describe("the ratio controller", () => {
  it("follows a shift from decode-heavy to prefill-heavy work within two minutes, the decisions no closer than its cooldown", () => {
    // 8 engines; 10 minutes of math agents (1.5 engines of prefill, 6 of decode), then computer-use (6 and 1.5).
    const played = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, 120, (round) => (round < 60 ? demand(1.5, 6) : demand(6, 1.5)));
    expect(played.prefillEngines[59]).toBe(2);
    // Proportional to the demand (6 : 1.5 of 8 engines is 6.4 : 1.6).
    expect(played.prefillEngines.at(-1)).toBe(6);
    const shiftSwitches = played.switches.filter((s) => s.at >= 60 * ROUND_MS);
    expect(shiftSwitches.every((s) => s.to === "prefill")).toBe(true);
    expect(shiftSwitches).toHaveLength(4);
    // Three rounds of asking, up to three engines at once, and decode keeps enough for itself: at most three decisions, within 120 s.
    expect(played.prefillEngines.findIndex((n, round) => round >= 60 && n === 6) - 60).toBeLessThanOrEqual(12);
    expect(new Set(shiftSwitches.map((s) => s.at)).size).toBeLessThanOrEqual(3);
    const decisions = [...new Set(played.switches.map((s) => s.at))];
    expect(decisions.slice(1).every((at, i) => at - decisions[i]! >= DEFAULT_RATIO_CONTROLLER.cooldownMs)).toBe(true);
    // Nothing moved before the shift: the starting split already fit.
    expect(played.switches.filter((s) => s.at < 60 * ROUND_MS)).toHaveLength(0);
  });

  it("does not flap: demand that wanders ±25 % around a split it fits moves nothing, for any wander", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.double({ min: -0.25, max: 0.25, noNaN: true }), fc.double({ min: -0.25, max: 0.25, noNaN: true })), { minLength: 360, maxLength: 360 }), (noise) => {
        const played = play(new RatioRoleController(CAPACITY), { prefill: 3, decode: 5 }, noise.length, (round) => {
          const [p, d] = noise[round]!;
          return demand(3 * 0.8 * (1 + p), 5 * 0.8 * (1 + d));
        });
        expect(played.switches).toHaveLength(0);
      }),
      { numRuns: 50 },
    );
  });

  it("rides out a burst shorter than its smoothing: a 20 s prefill spike every 5 minutes moves no engine", () => {
    const played = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, 180, (round) => (round % 30 < 2 ? demand(8, 4) : demand(1.5, 5)));
    expect(played.switches).toHaveLength(0);
  });

  it("keeps the engines of a side that misses its latency target, so two overloaded sides do not trade engines", () => {
    // Prefill has room (4 engines for 1.6), decode is short (4 for 6): an engine moves to decode...
    const moves = play(new RatioRoleController(CAPACITY, { ttftTargetMs: 1_000 }), { prefill: 4, decode: 4 }, 30, () => demand(1.6, 6, { ttftP95Ms: 500 }));
    expect(moves.switches[0]).toMatchObject({ from: "prefill", to: "decode" });
    // ...unless prefill is missing its TTFT target.
    const kept = play(new RatioRoleController(CAPACITY, { ttftTargetMs: 1_000 }), { prefill: 4, decode: 4 }, 30, () => demand(1.6, 6, { ttftP95Ms: 3_000 }));
    expect(kept.switches).toHaveLength(0);
  });

  it("counts a prefill backlog as work to clear, and decode's KV when it binds before its compute", () => {
    // Arrivals fit 2 prefill engines, but 240 engine-seconds are queued: over a 30 s horizon that is 8 more engines' worth.
    const backlog = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, 12, () => demand(1.6, 4, { prefillBacklogMs: 240_000 }));
    expect(backlog.switches.length).toBeGreaterThan(0);
    expect(backlog.switches.every((s) => s.to === "prefill")).toBe(true);
    // Decode computes 1.5 engines' worth but its calls hold 2.8M tokens of KV: 7 engines' KV.
    const kvBound = play(new RatioRoleController(CAPACITY), { prefill: 4, decode: 4 }, 30, () => demand(2, 1.5, { decodeKvTokens: 2_800_000 }));
    expect(kvBound.switches[0]).toMatchObject({ from: "prefill", to: "decode" });
    // The decode side gives no engine away that it would need itself: 6.5 engines' work on 7 decode engines stays.
    const full = play(new RatioRoleController(CAPACITY), { prefill: 1, decode: 7 }, 30, () => demand(1.5, 6.5));
    expect(full.switches).toHaveLength(0);
    const computeOnly = play(new RatioRoleController(CAPACITY), { prefill: 4, decode: 4 }, 30, () => demand(2, 1.5));
    expect(computeOnly.switches).toHaveLength(0);
  });

  it("moves nothing while the pool is idle, keeps each side's minimum, and drains the least-loaded engine", () => {
    // Below the floor (0.3 of the busier side's engines) nothing moves, however lopsided.
    expect(play(new RatioRoleController(CAPACITY), { prefill: 1, decode: 3 }, 60, () => demand(0.25, 0.05)).switches).toHaveLength(0);
    const all = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 2 }, 60, () => demand(8, 0.1));
    expect(all.prefillEngines.at(-1)).toBe(3);
    // d0 carries load 0, d1 load 1: the first to move is d0.
    expect(all.switches[0]?.engineId).toBe("d0");
  });
});

describe("the ratio controller with overlapping switches at the pool's round (2.5 s)", () => {
  const fast = { roundMs: DEFAULT_ROLE_ROUND_MS, mode: "overlap" } as const;
  const roundsIn = (ms: number) => Math.round(ms / DEFAULT_ROLE_ROUND_MS);
  /** The settings before switches overlapped, at their 10 s round with drains. */
  const BEFORE = { sustainRounds: 3, cooldownMs: 30_000 };

  it("follows a shift from decode-heavy to prefill-heavy work within 40 s (the old settings took over a minute), no decisions closer than the cooldown", () => {
    const shiftAt = roundsIn(600_000);
    const played = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, roundsIn(1_200_000), (round) => (round < shiftAt ? demand(1.5, 6) : demand(6, 1.5)), fast);
    expect(played.switches.filter((s) => s.at < 600_000)).toHaveLength(0);
    const reached = played.prefillEngines.findIndex((n, round) => round >= shiftAt && n === 6);
    expect((reached - shiftAt) * DEFAULT_ROLE_ROUND_MS).toBeLessThanOrEqual(40_000);
    // The first move within its sustain rounds (10 s) of the shift.
    expect(played.switches[0]!.at - 600_000).toBeLessThanOrEqual(DEFAULT_RATIO_CONTROLLER.sustainRounds * DEFAULT_ROLE_ROUND_MS);
    expect(played.prefillEngines.at(-1)).toBe(6);
    const decisions = [...new Set(played.switches.map((s) => s.at))];
    expect(decisions.slice(1).every((at, i) => at - decisions[i]! >= DEFAULT_RATIO_CONTROLLER.cooldownMs)).toBe(true);
    expect(played.switches.every((s) => s.to === "prefill")).toBe(true);

    const before = play(new RatioRoleController(CAPACITY, BEFORE), { prefill: 2, decode: 6 }, 120, (round) => (round < 60 ? demand(1.5, 6) : demand(6, 1.5)));
    expect((before.prefillEngines.findIndex((n, round) => round >= 60 && n === 6) - 60) * ROUND_MS).toBeGreaterThan(60_000);
  });

  it("follows a shift bigger than one decision's three engines with a second move within 10 s of the first (a 15 s cooldown let the queue grow twice as long)", () => {
    const shiftAt = roundsIn(300_000);
    const run = (settings = {}) =>
      play(new RatioRoleController(CAPACITY, settings), { prefill: 1, decode: 7 }, roundsIn(600_000), (round) => (round < shiftAt ? demand(0.8, 6) : demand(6, 1.5)), fast);
    const decisionsOf = (played: Played) => [...new Set(played.switches.map((s) => s.at))];
    const [first, second] = decisionsOf(run());
    expect(second! - first!).toBeLessThanOrEqual(10_000);
    expect(run().prefillEngines.at(-1)).toBe(6);
    const [oldFirst, oldSecond] = decisionsOf(run({ cooldownMs: 15_000 }));
    expect(oldSecond! - oldFirst!).toBeGreaterThanOrEqual(15_000);
  });

  it("does not flap at 2.5 s rounds: demand that wanders ±25 % around a split it fits moves nothing, for any wander", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.double({ min: -0.25, max: 0.25, noNaN: true }), fc.double({ min: -0.25, max: 0.25, noNaN: true })), { minLength: 720, maxLength: 720 }), (noise) => {
        const played = play(
          new RatioRoleController(CAPACITY),
          { prefill: 3, decode: 5 },
          noise.length,
          (round) => {
            const [p, d] = noise[round]!;
            return demand(3 * 0.8 * (1 + p), 5 * 0.8 * (1 + d));
          },
          fast,
        );
        expect(played.switches).toHaveLength(0);
      }),
      { numRuns: 50 },
    );
  });

  it("rides out a burst shorter than its sustain rounds: a 7.5 s prefill spike every 5 minutes moves no engine", () => {
    const period = roundsIn(300_000);
    const played = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, roundsIn(1_800_000), (round) => (round % period < 3 ? demand(8, 4) : demand(1.5, 5)), fast);
    expect(played.switches).toHaveLength(0);
  });

  it("follows demand that swings every minute, turning back at most once a swing and never within its cooldown", () => {
    // Prefill-heavy and decode-heavy minutes in turn, for 20 minutes: the split follows each swing.
    const minute = roundsIn(60_000);
    const played = play(new RatioRoleController(CAPACITY), { prefill: 4, decode: 4 }, roundsIn(1_200_000), (round) => (Math.floor(round / minute) % 2 === 0 ? demand(5.5, 1.5) : demand(1.5, 5.5)), fast);
    const decisions = [...new Map(played.switches.map((s) => [s.at, s.to])).entries()];
    expect(decisions.slice(1).every(([at], i) => at - decisions[i]![0] >= DEFAULT_RATIO_CONTROLLER.cooldownMs)).toBe(true);
    const turns = decisions.slice(1).filter(([, to], i) => to !== decisions[i]![1]);
    expect(turns.length).toBeGreaterThanOrEqual(15);
    expect(turns.length).toBeLessThanOrEqual(19);
    // A turn comes only after the swing it follows has lasted the sustain rounds.
    expect(turns.every(([at]) => (at % 60_000) >= DEFAULT_RATIO_CONTROLLER.sustainRounds * DEFAULT_ROLE_ROUND_MS - DEFAULT_ROLE_ROUND_MS)).toBe(true);
  });
});

describe("the ratio controller on demand the meter measured", () => {
  // 0.03 engine-ms a prefilled token (no attention, for round figures); a decode token at 1,000 tokens of context costs 1 engine-ms.
  const MODEL: RoleWorkModel = { decodeBaseMs: 0, perTokenMs: 0.03, perContextTokenMs: 0.001, perSequenceMs: 0, attentionMsPerTokenPair: 0, batchSequences: 1 };

  /**
   * Each 10 s round: 40 calls of 30,000-token prompts sent to prefill as `estimate`
   * (new tokens after a cached prefix) whose engines report `foundCached`, and
   * `decodeEngines` engines' worth of output tokens.
   */
  const metered = (estimate: { fresh: number; cached: number }, foundCached: number, decodeEngines: number) => {
    const meter = new RoleDemandMeter(MODEL, 0);
    return (round: number): RoleDemand => {
      for (let i = 0; i < 40; i++) {
        const id = `r${round}c${i}`;
        meter.prefillQueued(id, estimate.fresh, estimate.cached);
        meter.prefillDone(id, 500, { promptTokens: 30_000, cachedTokens: foundCached });
      }
      meter.decoded(decodeEngines * ROUND_MS, 1_000);
      return meter.read((round + 1) * ROUND_MS, { decodeKvTokens: 0, prefillQueue: 0, decodeKvUsage: 0.5 });
    };
  };

  it("keeps the prefill engines whose contexts were evicted: the estimate said 0.12 engines of prefill, the engines' reports 3.6", () => {
    // A coding agent's next call: 1,000 new tokens after its 29,000-token context, as the simulator prices it (30 engine-ms);
    // the engine had evicted the context and computed all 30,000 (900 engine-ms): 40 a round is 3.6 engines, not 0.12.
    // Decode has 6 engines' work on 4. Priced by the estimate, prefill looked idle and gave decode all but one engine (4:4 → 1:7).
    const played = play(new RatioRoleController(CAPACITY), { prefill: 4, decode: 4 }, 30, metered({ fresh: 1_000, cached: 29_000 }, 0, 6));
    expect(played.switches).toHaveLength(0);
    expect(played.prefillEngines.at(-1)).toBe(4);
  });

  it("does not take decode engines for prefill work the engines' caches did not need", () => {
    // The pool's estimate: the whole 30,000-token prompt computed (900 engine-ms); the engine found 29,000 cached (30).
    const played = play(new RatioRoleController(CAPACITY), { prefill: 4, decode: 4 }, 30, metered({ fresh: 30_000, cached: 0 }, 29_000, 1.5));
    // The decode side's 1.5 engines of work may take a prefill engine; no decode engine goes to prefill.
    expect(played.switches.filter((s) => s.to === "prefill")).toHaveLength(0);
    expect(Math.max(...played.prefillEngines)).toBeLessThanOrEqual(4);
  });
});

describe("the ratio controller at light load", () => {
  const fast = { roundMs: DEFAULT_ROLE_ROUND_MS, mode: "overlap" } as const;

  it("gives an idle prefill engine to a decode side a third busy (the math phase), where the old 0.7 floor held the split", () => {
    // 2:6 with 0.25 engines of prefill and 2.5 of decode work: decode at 0.42 of its engines, prefill at 0.13.
    const curve = () => demand(0.25, 2.5);
    const played = play(new RatioRoleController(CAPACITY), { prefill: 2, decode: 6 }, 40, curve, fast);
    expect(played.switches).toHaveLength(1);
    expect(played.switches[0]).toMatchObject({ from: "prefill", to: "decode" });
    expect(played.prefillEngines.at(-1)).toBe(1);
    const floorBefore = play(new RatioRoleController(CAPACITY, { minLoadToAct: 0.7, hysteresis: 0.15 }), { prefill: 2, decode: 6 }, 40, curve, fast);
    expect(floorBefore.switches).toHaveLength(0);
  });

});

describe("the threshold baseline (Dynamo-planner-like)", () => {
  it("moves an engine to prefill on a long prefill queue, to decode on high KV use, and holds when both are high", () => {
    const queue = play(new ThresholdRoleController(), { prefill: 2, decode: 6 }, 3, () => demand(1, 1, { prefillQueue: 20, decodeKvUsage: 0.2 }));
    expect(queue.switches[0]).toMatchObject({ from: "decode", to: "prefill" });
    const kv = play(new ThresholdRoleController(), { prefill: 4, decode: 4 }, 3, () => demand(1, 1, { prefillQueue: 0, decodeKvUsage: 0.95 }));
    expect(kv.switches[0]).toMatchObject({ from: "prefill", to: "decode" });
    // Both sides short: thresholds alone cannot say which needs the engine more.
    const both = play(new ThresholdRoleController(), { prefill: 4, decode: 4 }, 30, () => demand(1, 1, { prefillQueue: 40, decodeKvUsage: 0.95 }));
    expect(both.switches).toHaveLength(0);
  });
});
