import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { compareObjectives, type PlanObjective } from "../../../src/core/tao/objective.js";
import { planPlacement } from "../../../src/core/tao/planner.js";
import type { PlannerSettings } from "../../../src/core/tao/settings.js";
import type { TaoProgram, TaoSnapshot } from "../../../src/core/tao/snapshot.js";

const QUANTUM = 100;
const settings: PlannerSettings = { quantumTokens: QUANTUM, stateBudget: 1_000_000, planTtlMs: 1_000 };

interface Best {
  objective: PlanObjective;
  ranks: number[];
  assignment: number[];
}

/**
 * Every assignment of every program (left out, or on an engine it may use), written
 * out from the documented rules rather than from the planner's own code: eligibility,
 * quantisation, credit counting, and the total order (objective, then decision ranks
 * in snapshot order).
 */
function bruteForce(snapshot: TaoSnapshot): Best {
  const engines = snapshot.engines;
  const capacity = engines.map((e) => Math.floor(e.freeTokens / QUANTUM));
  const info = snapshot.programs.map((p) => {
    const units = Math.ceil(p.tokens / QUANTUM);
    const credit = engines.map((e) => Math.min(p.tokens, Math.floor(p.credit?.[e.engineId] ?? 0)));
    let allowed: number[] = [];
    if (p.queued) allowed = engines.map((_, i) => i);
    else if (p.ready) {
      const best = Math.max(0, ...credit);
      if (best > 0) allowed = [credit.indexOf(best)];
    }
    allowed.sort((a, b) => (credit[b] as number) - (credit[a] as number) || (engines[b]?.freeTokens ?? 0) - (engines[a]?.freeTokens ?? 0) || a - b);
    return { p, units, credit, allowed };
  });
  let best: Best | undefined;
  const assignment: number[] = [];
  const ranks: number[] = [];
  const visit = (i: number, left: number[], objective: PlanObjective): void => {
    if (i === info.length) {
      const better =
        best === undefined ||
        compareObjectives(objective, best.objective) > 0 ||
        (compareObjectives(objective, best.objective) === 0 && ranks.join(",") !== best.ranks.join(",") && lexLess(ranks, best.ranks));
      if (better) best = { objective: { ...objective }, ranks: [...ranks], assignment: [...assignment] };
      return;
    }
    const { p, units, credit, allowed } = info[i] as (typeof info)[number];
    allowed.forEach((engine, rank) => {
      if ((left[engine] as number) < units) return;
      left[engine] = (left[engine] as number) - units;
      assignment.push(engine);
      ranks.push(rank);
      visit(i + 1, left, { credit: objective.credit + (credit[engine] as number), ready: objective.ready + (p.ready ? 1 : 0), tokens: objective.tokens + p.tokens });
      ranks.pop();
      assignment.pop();
      left[engine] = (left[engine] as number) + units;
    });
    assignment.push(-1);
    ranks.push(Number.MAX_SAFE_INTEGER);
    visit(i + 1, left, objective);
    ranks.pop();
    assignment.pop();
  };
  visit(0, capacity, { credit: 0, ready: 0, tokens: 0 });
  return best as Best;
}

function lexLess(a: number[], b: number[]): boolean {
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) return (a[i] as number) < (b[i] as number);
  }
  return false;
}

const engineIds = ["eng_a", "eng_b", "eng_c"];
// Few distinct values, so equal objectives (ties) are common.
const program = (index: number): fc.Arbitrary<TaoProgram> =>
  fc.record({
    programId: fc.constant(`prog_${index}`),
    tokens: fc.constantFrom(1, 100, 150, 200, 300, 420),
    queued: fc.boolean(),
    ready: fc.boolean(),
    credit: fc.dictionary(fc.constantFrom(...engineIds), fc.constantFrom(0, 60, 100, 100.7, 250, 900), { maxKeys: 2 }),
  });

const snapshot: fc.Arbitrary<TaoSnapshot> = fc
  .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 6 }))
  .chain(([engines, programs]) =>
    fc.record({
      at: fc.constant(0),
      engines: fc.tuple(...engineIds.slice(0, engines).map((engineId) => fc.record({ engineId: fc.constant(engineId), freeTokens: fc.integer({ min: 0, max: 650 }) }))),
      programs: programs === 0 ? fc.constant([]) : fc.tuple(...Array.from({ length: programs }, (_, i) => program(i))),
    }),
  );

function feasible(snap: TaoSnapshot, entries: { programId: string; engineId: string; units: number; tokens: number }[]): boolean {
  for (const engine of snap.engines) {
    const on = entries.filter((e) => e.engineId === engine.engineId);
    if (on.reduce((a, e) => a + e.units, 0) > Math.floor(engine.freeTokens / QUANTUM)) return false;
    if (on.reduce((a, e) => a + e.tokens, 0) > engine.freeTokens) return false;
  }
  return new Set(entries.map((e) => e.programId)).size === entries.length;
}

describe("TAO planner against brute force", () => {
  it("the DP's objective is the optimum, and its plan the first optimum of the documented total order", () => {
    fc.assert(
      fc.property(snapshot, (snap) => {
        const plan = planPlacement(snap, settings);
        expect(plan.method).toBe("dp");
        const best = bruteForce(snap);
        expect(plan.objective).toEqual(best.objective);
        const expected = best.assignment.flatMap((engine, i) => (engine < 0 ? [] : [{ programId: snap.programs[i]?.programId, engineId: snap.engines[engine]?.engineId }]));
        expect(plan.entries.map((e) => ({ programId: e.programId, engineId: e.engineId }))).toEqual(expected);
        expect(feasible(snap, plan.entries)).toBe(true);
        expect(compareObjectives(plan.upperBound, plan.objective)).toBeGreaterThanOrEqual(0);
      }),
      { numRuns: 400 },
    );
  });

  it("best-fit-decreasing is feasible and never beats the DP", () => {
    fc.assert(
      fc.property(snapshot, (snap) => {
        const exact = planPlacement(snap, settings);
        const greedy = planPlacement(snap, settings, { method: "best-fit-decreasing" });
        expect(feasible(snap, greedy.entries)).toBe(true);
        expect(compareObjectives(exact.objective, greedy.objective)).toBeGreaterThanOrEqual(0);
        expect(greedy.provablyOptimal).toBe(compareObjectives(greedy.objective, greedy.upperBound) === 0);
        const sum = greedy.entries.reduce((a, e) => ({ credit: a.credit + e.credit, ready: a.ready + (e.ready ? 1 : 0), tokens: a.tokens + e.tokens }), { credit: 0, ready: 0, tokens: 0 });
        expect(greedy.objective).toEqual(sum);
      }),
      { numRuns: 300 },
    );
  });

  it("is deterministic: the same snapshot gives the same plan", () => {
    fc.assert(
      fc.property(snapshot, (snap) => {
        expect(planPlacement(structuredClone(snap), settings)).toEqual(planPlacement(snap, settings));
      }),
      { numRuns: 100 },
    );
  });
});
