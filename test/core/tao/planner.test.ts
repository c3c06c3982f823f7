import { describe, expect, it } from "vitest";
import { compareCandidates } from "../../../src/core/tao/objective.js";
import { createPlannerStats, planPlacement, planStateSpace } from "../../../src/core/tao/planner.js";
import type { PlannerSettings } from "../../../src/core/tao/settings.js";
import type { TaoEngine, TaoProgram, TaoSnapshot } from "../../../src/core/tao/snapshot.js";

const settings = (overrides: Partial<PlannerSettings> = {}): PlannerSettings => ({ quantumTokens: 1_000, stateBudget: 1_000_000, planTtlMs: 1_000, ...overrides });

const queued = (programId: string, tokens: number, credit: Record<string, number> = {}): TaoProgram => ({ programId, tokens, queued: true, ready: true, credit });

/**
 * Per-call greedy placement, as a router without a joint view does it: calls in
 * arrival order, each to the engine with the most cache credit for it where it fits,
 * otherwise to the engine with the most free tokens where it fits (first on ties).
 */
function perCallGreedy(snapshot: TaoSnapshot): Map<string, string> {
  const free = new Map(snapshot.engines.map((e) => [e.engineId, e.freeTokens]));
  const placed = new Map<string, string>();
  for (const program of snapshot.programs) {
    const fits = snapshot.engines.filter((e) => (free.get(e.engineId) ?? 0) >= program.tokens);
    const cached = fits.filter((e) => (program.credit?.[e.engineId] ?? 0) > 0).sort((a, b) => (program.credit?.[b.engineId] ?? 0) - (program.credit?.[a.engineId] ?? 0));
    const leastLoaded = [...fits].sort((a, b) => (free.get(b.engineId) ?? 0) - (free.get(a.engineId) ?? 0));
    const engine = cached[0] ?? leastLoaded[0];
    if (engine === undefined) continue;
    free.set(engine.engineId, (free.get(engine.engineId) ?? 0) - program.tokens);
    placed.set(program.programId, engine.engineId);
  }
  return placed;
}

describe("the worked case: per-call greedy leaves the long context out", () => {
  // Engine A has 8k free tokens and holds L's context (5k credit); B has 6k free.
  // Four 2k-token short calls arrive before L's 6k-token call.
  const snapshot: TaoSnapshot = {
    at: 0,
    engines: [
      { engineId: "A", freeTokens: 8_000 },
      { engineId: "B", freeTokens: 6_000 },
    ],
    programs: [queued("S1", 2_000), queued("S2", 2_000), queued("S3", 2_000), queued("S4", 2_000), queued("L", 6_000, { A: 5_000 })],
  };

  it("per-call greedy fills A with short calls and cannot place L anywhere", () => {
    const greedy = perCallGreedy(snapshot);
    expect([...greedy.entries()]).toEqual([
      ["S1", "A"],
      ["S2", "A"],
      ["S3", "B"],
      ["S4", "A"],
    ]);
    expect(greedy.has("L")).toBe(false);
  });

  it("the joint plan admits all five, L on its cache engine", () => {
    const plan = planPlacement(snapshot, settings());
    expect(plan.method).toBe("dp");
    expect(plan.entries).toHaveLength(5);
    expect(plan.entries.find((e) => e.programId === "L")?.engineId).toBe("A");
    expect(plan.objective).toEqual({ credit: 5_000, ready: 5, tokens: 14_000 });
    expect(plan.plannedTokens).toEqual({ A: 8_000, B: 6_000 });
    expect(plan.provablyOptimal).toBe(true);
  });
});

describe("fallback to best-fit-decreasing at the state budget", () => {
  // One engine with q free quanta and n one-quantum calls: state space n × (q + 1).
  const sized = (n: number, q: number): TaoSnapshot => ({
    at: 0,
    engines: [{ engineId: "A", freeTokens: q * 1_000 }],
    programs: Array.from({ length: n }, (_, i) => queued(`p${i}`, 1_000)),
  });

  it("counts the state space as candidates × Π(quanta + 1), capped by demand", () => {
    expect(planStateSpace(sized(7, 1), settings())).toBe(14);
    expect(planStateSpace(sized(5, 2), settings())).toBe(15);
    expect(planStateSpace(sized(8, 1), settings())).toBe(16);
    // 3 programs cannot use more than 3 quanta: the 10 free ones count as 3.
    expect(planStateSpace(sized(3, 10), settings())).toBe(12);
    const twoEngines: TaoSnapshot = { at: 0, engines: [{ engineId: "A", freeTokens: 2_500 }, { engineId: "B", freeTokens: 1_000 }, { engineId: "C", freeTokens: 999 }], programs: [queued("x", 1_000), queued("y", 900), queued("z", 1_001)] };
    // Units: A ⌊2.5⌋ = 2, B 1, C 0; z needs 2 quanta, fits only on A; all three are candidates.
    expect(planStateSpace(twoEngines, settings())).toBe(3 * 3 * 2);
  });

  it("state spaces budget-1 and budget run the DP, budget+1 falls back", () => {
    const stats = createPlannerStats();
    const budget = settings({ stateBudget: 15 });
    expect(planPlacement(sized(7, 1), budget, { stats }).method).toBe("dp");
    expect(planPlacement(sized(5, 2), budget, { stats }).method).toBe("dp");
    const over = planPlacement(sized(8, 1), budget, { stats });
    expect(over.method).toBe("best-fit-decreasing");
    expect(over.fellBack).toBe(true);
    expect(over.stateSpace).toBe(16);
    expect(stats).toMatchObject({ plans: 3, dp: 2, bestFit: 1, fallbacks: 1, maxStateSpace: 16 });
    // The fallback plan fills the one quantum, which is optimal here, and says so.
    expect(over.entries).toHaveLength(1);
    expect(stats.fallbacksAtBound).toBe(0);
  });

  it("the same snapshot runs the DP with budget >= its state space and falls back below", () => {
    const snap = sized(5, 2);
    expect(planPlacement(snap, settings({ stateBudget: 14 })).method).toBe("best-fit-decreasing");
    expect(planPlacement(snap, settings({ stateBudget: 15 })).method).toBe("dp");
    expect(planPlacement(snap, settings({ stateBudget: 16 })).method).toBe("dp");
  });

  it("a forced method is not counted as a fallback", () => {
    const stats = createPlannerStats();
    planPlacement(sized(5, 2), settings(), { stats, method: "best-fit-decreasing" });
    expect(stats).toMatchObject({ plans: 1, dp: 0, bestFit: 1, fallbacks: 0 });
  });
});

describe("eligibility and reservations", () => {
  const engines: TaoEngine[] = [
    { engineId: "A", freeTokens: 4_000 },
    { engineId: "B", freeTokens: 4_000 },
  ];

  it("a program ready soon reserves only on its cache engine; one neither queued nor ready is not placed", () => {
    const plan = planPlacement(
      {
        at: 0,
        engines,
        programs: [
          { programId: "soon", tokens: 3_000, queued: false, ready: true, credit: { A: 500, B: 2_500 } },
          { programId: "later", tokens: 1_000, queued: false, ready: false, credit: { A: 1_000 } },
          { programId: "nocache", tokens: 1_000, queued: false, ready: true },
        ],
      },
      settings(),
    );
    expect(plan.entries).toEqual([{ programId: "soon", engineId: "B", kind: "reserve", tokens: 3_000, units: 3, credit: 2_500, ready: true }]);
    expect(plan.reservedTokens).toEqual({ A: 0, B: 3_000 });
  });

  it("a reservation whose cache engine is full is not moved elsewhere", () => {
    const plan = planPlacement(
      { at: 0, engines: [{ engineId: "A", freeTokens: 0 }, { engineId: "B", freeTokens: 9_000 }], programs: [{ programId: "soon", tokens: 1_000, queued: false, ready: true, credit: { A: 800 } }] },
      settings(),
    );
    expect(plan.entries).toEqual([]);
  });

  it("cache credit outranks admitting more programs: the reserved cache holder beats two fresh calls", () => {
    const plan = planPlacement(
      {
        at: 0,
        engines: [{ engineId: "A", freeTokens: 2_000 }],
        programs: [queued("fresh1", 1_000), queued("fresh2", 1_000), { programId: "holder", tokens: 2_000, queued: false, ready: true, credit: { A: 1_500 } }],
      },
      settings(),
    );
    expect(plan.entries.map((e) => e.programId)).toEqual(["holder"]);
  });

  it("demands round up and capacities round down, so a plan never overfills an engine", () => {
    const plan = planPlacement({ at: 0, engines: [{ engineId: "A", freeTokens: 1_999 }], programs: [queued("a", 1_001), queued("b", 1)] }, settings());
    // 1 quantum free; a needs 2 (⌈1,001 / 1,000⌉), so only b is placed, though 1,002 tokens would fit in 1,999.
    expect(plan.entries.map((e) => e.programId)).toEqual(["b"]);
  });

  it("equal plans go to the program earlier in priority order", () => {
    const plan = planPlacement({ at: 0, engines: [{ engineId: "A", freeTokens: 1_000 }], programs: [queued("first", 1_000), queued("second", 1_000)] }, settings());
    expect(plan.entries.map((e) => e.programId)).toEqual(["first"]);
  });

  it("credit counts in whole tokens, at most the program's tokens", () => {
    const plan = planPlacement({ at: 0, engines: [{ engineId: "A", freeTokens: 5_000 }], programs: [queued("a", 1_000, { A: 4_000.9 }), queued("b", 1_000, { A: 10.9 })] }, settings());
    expect(plan.entries.map((e) => e.credit)).toEqual([1_000, 10]);
  });
});

describe("candidate order", () => {
  it("compares credit, then readiness, then tokens (larger first), then priority and engine order", () => {
    const key = (credit: number, ready: boolean, tokens: number, programRank = 0, engineRank = 0) => ({ credit, ready, tokens, programRank, engineRank });
    const sorted = [key(0, true, 9_000), key(10, false, 1), key(10, true, 5), key(10, true, 50), key(10, true, 50, 1), key(10, true, 50, 0, 1)].sort(compareCandidates);
    expect(sorted).toEqual([key(10, true, 50), key(10, true, 50, 0, 1), key(10, true, 50, 1), key(10, true, 5), key(10, false, 1), key(0, true, 9_000)]);
  });
});

describe("bad input", () => {
  const ok: TaoSnapshot = { at: 0, engines: [{ engineId: "A", freeTokens: 1_000 }], programs: [queued("a", 10)] };

  it("rejects bad snapshots and settings with clear errors", () => {
    expect(() => planPlacement({ ...ok, programs: [queued("a", 0)] }, settings())).toThrow(/tokens must be an integer/);
    expect(() => planPlacement({ ...ok, programs: [queued("a", 1.5)] }, settings())).toThrow(/tokens must be an integer/);
    expect(() => planPlacement({ ...ok, programs: [queued("a", 1), queued("a", 2)] }, settings())).toThrow(/duplicate program a/);
    expect(() => planPlacement({ ...ok, engines: [{ engineId: "A", freeTokens: -1 }] }, settings())).toThrow(/freeTokens/);
    expect(() => planPlacement({ ...ok, engines: [...ok.engines, ...ok.engines] }, settings())).toThrow(/duplicate engine A/);
    expect(() => planPlacement({ ...ok, programs: [queued("a", 1, { A: Number.NaN })] }, settings())).toThrow(/credit on A/);
    expect(() => planPlacement({ ...ok, at: Number.NaN }, settings())).toThrow(/snapshot.at/);
    expect(() => planPlacement(ok, settings({ quantumTokens: 0 }))).toThrow(/quantumTokens/);
    expect(() => planPlacement(ok, settings({ stateBudget: -1 }))).toThrow(/stateBudget/);
  });

  it("refuses a forced DP beyond the largest allowed state space", () => {
    const huge: TaoSnapshot = {
      at: 0,
      engines: Array.from({ length: 8 }, (_, i) => ({ engineId: `e${i}`, freeTokens: 40_000 })),
      programs: Array.from({ length: 100 }, (_, i) => queued(`p${i}`, 1_000)),
    };
    expect(() => planPlacement(huge, settings(), { method: "dp" })).toThrow(/largest DP allowed/);
    expect(planPlacement(huge, settings()).method).toBe("best-fit-decreasing");
  });
});
