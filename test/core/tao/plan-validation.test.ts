import { describe, expect, it } from "vitest";
import { validatePlan, validatePlanEntry } from "../../../src/core/tao/plan-validation.js";
import { planPlacement, type TaoPlanEntry } from "../../../src/core/tao/planner.js";
import type { PlannerSettings } from "../../../src/core/tao/settings.js";
import type { TaoProgram, TaoSnapshot } from "../../../src/core/tao/snapshot.js";

const settings: PlannerSettings = { quantumTokens: 1_000, stateBudget: 1_000_000, planTtlMs: 1_000 };

const snapshot: TaoSnapshot = {
  at: 10_000,
  engines: [
    { engineId: "A", freeTokens: 4_000 },
    { engineId: "B", freeTokens: 3_000 },
  ],
  programs: [
    { programId: "a", tokens: 2_000, queued: true, ready: true, credit: { A: 2_000 } },
    { programId: "b", tokens: 1_500, queued: true, ready: true, credit: { A: 1_000 } },
    { programId: "r", tokens: 2_500, queued: false, ready: true, credit: { B: 2_000 } },
  ],
};
const plan = planPlacement(snapshot, settings);
const entry = (programId: string): TaoPlanEntry => plan.entries.find((e) => e.programId === programId) as TaoPlanEntry;

const live = (change: { at?: number; programs?: (p: TaoProgram) => TaoProgram | undefined; free?: Record<string, number> } = {}): TaoSnapshot => ({
  at: change.at ?? snapshot.at + 100,
  engines: snapshot.engines.filter((e) => change.free?.[e.engineId] !== -1).map((e) => ({ ...e, freeTokens: change.free?.[e.engineId] ?? e.freeTokens })),
  programs: snapshot.programs.flatMap((p) => change.programs?.(p) ?? (change.programs === undefined ? p : [])),
});

describe("re-validating a plan against live state", () => {
  it("the plan is as expected: a and b on A, r reserves B", () => {
    expect(plan.entries.map((e) => [e.programId, e.engineId, e.kind])).toEqual([
      ["a", "A", "dispatch"],
      ["b", "A", "dispatch"],
      ["r", "B", "reserve"],
    ]);
  });

  it("unchanged live state: every entry valid, the signature matches", () => {
    const result = validatePlan(plan, live());
    expect(result.unchanged).toBe(true);
    expect(result.apply).toEqual(plan.entries);
    expect(result.skipped).toEqual([]);
  });

  it("skips entries of programs that left, calls already taken, reservations no longer ready", () => {
    const state = live({
      programs: (p) => {
        if (p.programId === "a") return undefined;
        if (p.programId === "b") return { ...p, queued: false };
        return { ...p, ready: false };
      },
    });
    expect(validatePlanEntry(plan, entry("a"), state)).toEqual({ valid: false, reason: "program-gone" });
    expect(validatePlanEntry(plan, entry("b"), state)).toEqual({ valid: false, reason: "call-gone" });
    expect(validatePlanEntry(plan, entry("r"), state)).toEqual({ valid: false, reason: "not-ready" });
    expect(validatePlan(plan, state).unchanged).toBe(false);
  });

  it("a reservation whose call has arrived is still valid", () => {
    const state = live({ programs: (p) => (p.programId === "r" ? { ...p, queued: true } : p) });
    expect(validatePlanEntry(plan, entry("r"), state)).toEqual({ valid: true });
  });

  it("skips a program that now needs more quanta than planned, but not one that grew within its quanta", () => {
    expect(validatePlanEntry(plan, entry("b"), live({ programs: (p) => (p.programId === "b" ? { ...p, tokens: 2_001 } : p) }))).toEqual({ valid: false, reason: "program-grew" });
    expect(validatePlanEntry(plan, entry("b"), live({ programs: (p) => (p.programId === "b" ? { ...p, tokens: 2_000 } : p) }))).toEqual({ valid: true });
  });

  it("skips entries whose engine left or no longer has the room", () => {
    expect(validatePlanEntry(plan, entry("r"), live({ free: { B: -1 } }))).toEqual({ valid: false, reason: "engine-gone" });
    expect(validatePlanEntry(plan, entry("r"), live({ free: { B: 2_499 } }))).toEqual({ valid: false, reason: "capacity" });
    expect(validatePlanEntry(plan, entry("r"), live({ free: { B: 2_500 } }))).toEqual({ valid: true });
  });

  it("applies in order: when A shrank, the first entry still fits and the second is skipped", () => {
    const result = validatePlan(plan, live({ free: { A: 3_000 } }));
    expect(result.apply.map((e) => e.programId)).toEqual(["a", "r"]);
    expect(result.skipped).toEqual([{ entry: entry("b"), reason: "capacity" }]);
    expect(validatePlanEntry(plan, entry("b"), live({ free: { A: 3_000 } }), { A: 2_000 })).toEqual({ valid: false, reason: "capacity" });
  });

  it("a plan past its lifetime is stale as a whole", () => {
    const result = validatePlan(plan, live({ at: plan.validUntil + 1 }));
    expect(result.apply).toEqual([]);
    expect(result.skipped.every((s) => s.reason === "plan-expired")).toBe(true);
    expect(validatePlan(plan, live({ at: plan.validUntil })).apply).toHaveLength(3);
  });
});
