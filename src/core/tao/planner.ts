/*
 * TAO planner: selects which waiting programs to admit, and on which engine, for the
 * whole waiting pool at once, under each engine's free KV capacity quantised by Δ.
 * Objective and tie-breaks: objective.ts. Eligibility and the state space:
 * problem.ts. Exact DP (dp.ts) while candidates × Π(quanta + 1) <= stateBudget,
 * otherwise best-fit-decreasing (best-fit.ts), and the fallback is counted.
 *
 * Pure: a plan is computed from a snapshot (off the hot path) and carries what it
 * assumed, so the caller re-validates each entry against live state before applying
 * it (plan-validation.ts).
 */

import { bestFitDecreasing } from "./best-fit.js";
import { type Decisions, solveExact } from "./dp.js";
import { compareObjectives, type PlanObjective } from "./objective.js";
import { buildProblem, type EntryKind, type PlacementProblem, upperBound } from "./problem.js";
import { MAX_STATE_BUDGET, type PlannerSettings, validatePlannerSettings } from "./settings.js";
import { snapshotSignature } from "./signature.js";
import { type TaoSnapshot, validateSnapshot } from "./snapshot.js";

export type PlanMethod = "dp" | "best-fit-decreasing";

export interface TaoPlanEntry {
  programId: string;
  engineId: string;
  /** dispatch: send its queued call; reserve: hold the capacity for its imminent call. */
  kind: EntryKind;
  /** Tokens planned (the program's tokens in the snapshot). */
  tokens: number;
  /** Quanta planned (⌈tokens / Δ⌉). */
  units: number;
  /** Whole credit tokens on that engine, as counted in the objective. */
  credit: number;
  ready: boolean;
}

export interface TaoPlan {
  at: number;
  /** Entries apply until then (at + planTtlMs); later, re-plan. */
  validUntil: number;
  method: PlanMethod;
  /** best-fit-decreasing because the state space passed the budget. */
  fellBack: boolean;
  stateSpace: number;
  stateBudget: number;
  quantumTokens: number;
  /** In snapshot (priority) order, which is the order to apply them in. */
  entries: TaoPlanEntry[];
  objective: PlanObjective;
  /** No plan can beat this; objective === upperBound proves a fallback plan optimal too. */
  upperBound: PlanObjective;
  provablyOptimal: boolean;
  /** Tokens planned per engine (every engine of the snapshot, 0 when none). */
  plannedTokens: Record<string, number>;
  /** Of which reservations. */
  reservedTokens: Record<string, number>;
  /** snapshotSignature of the input. */
  signature: string;
}

export interface PlannerStats {
  plans: number;
  dp: number;
  bestFit: number;
  /** Plans that fell back to best-fit-decreasing because the state space passed the budget. */
  fallbacks: number;
  /** Of the fallbacks, those whose plan reached the upper bound (so were optimal anyway). */
  fallbacksAtBound: number;
  maxStateSpace: number;
}

export function createPlannerStats(): PlannerStats {
  return { plans: 0, dp: 0, bestFit: 0, fallbacks: 0, fallbacksAtBound: 0, maxStateSpace: 0 };
}

export interface PlanOptions {
  /** Accumulates method counts; mutated. */
  stats?: PlannerStats;
  /** "auto" (default) follows the budget; the others force a method (tests, benchmarks). */
  method?: "auto" | PlanMethod;
}

/** The DP state space the snapshot would need: candidates × Π(quanta + 1). */
export function planStateSpace(snapshot: TaoSnapshot, settings: PlannerSettings): number {
  validatePlannerSettings(settings);
  validateSnapshot(snapshot);
  return buildProblem(snapshot, settings.quantumTokens).stateSpace;
}

export function planPlacement(snapshot: TaoSnapshot, settings: PlannerSettings, options: PlanOptions = {}): TaoPlan {
  validatePlannerSettings(settings);
  validateSnapshot(snapshot);
  const problem = buildProblem(snapshot, settings.quantumTokens);
  const requested = options.method ?? "auto";
  const fellBack = requested === "auto" && problem.stateSpace > settings.stateBudget;
  const method: PlanMethod = requested === "auto" ? (fellBack ? "best-fit-decreasing" : "dp") : requested;
  if (method === "dp" && problem.stateSpace > MAX_STATE_BUDGET) {
    throw new RangeError(`state space ${problem.stateSpace} is above the largest DP allowed (${MAX_STATE_BUDGET})`);
  }
  const decisions = method === "dp" ? solveExact(problem) : bestFitDecreasing(problem);
  const plan = toPlan(problem, decisions, method, fellBack, settings, snapshot);

  const stats = options.stats;
  if (stats !== undefined) {
    stats.plans += 1;
    if (method === "dp") stats.dp += 1;
    else stats.bestFit += 1;
    if (fellBack) {
      stats.fallbacks += 1;
      if (plan.provablyOptimal) stats.fallbacksAtBound += 1;
    }
    stats.maxStateSpace = Math.max(stats.maxStateSpace, problem.stateSpace);
  }
  return plan;
}

function toPlan(
  problem: PlacementProblem,
  decisions: Decisions,
  method: PlanMethod,
  fellBack: boolean,
  settings: PlannerSettings,
  snapshot: TaoSnapshot,
): TaoPlan {
  const plannedTokens: Record<string, number> = {};
  const reservedTokens: Record<string, number> = {};
  for (const engine of snapshot.engines) {
    plannedTokens[engine.engineId] = 0;
    reservedTokens[engine.engineId] = 0;
  }
  const entries: TaoPlanEntry[] = [];
  const objective = { credit: 0, ready: 0, tokens: 0 };
  problem.candidates.forEach((candidate, k) => {
    const decision = decisions[k] ?? -1;
    if (decision < 0) return;
    const choice = candidate.choices[decision];
    const engine = choice === undefined ? undefined : snapshot.engines[choice.engine];
    if (choice === undefined || engine === undefined) throw new Error(`planner invariant broken: bad decision for ${candidate.program.programId}`);
    entries.push({
      programId: candidate.program.programId,
      engineId: engine.engineId,
      kind: candidate.kind,
      tokens: candidate.tokens,
      units: candidate.units,
      credit: choice.credit,
      ready: candidate.ready === 1,
    });
    objective.credit += choice.credit;
    objective.ready += candidate.ready;
    objective.tokens += candidate.tokens;
    plannedTokens[engine.engineId] = (plannedTokens[engine.engineId] ?? 0) + candidate.tokens;
    if (candidate.kind === "reserve") reservedTokens[engine.engineId] = (reservedTokens[engine.engineId] ?? 0) + candidate.tokens;
  });
  const bound = upperBound(problem);
  return {
    at: snapshot.at,
    validUntil: snapshot.at + settings.planTtlMs,
    method,
    fellBack,
    stateSpace: problem.stateSpace,
    stateBudget: settings.stateBudget,
    quantumTokens: settings.quantumTokens,
    entries,
    objective,
    upperBound: bound,
    provablyOptimal: method === "dp" || compareObjectives(objective, bound) === 0,
    plannedTokens,
    reservedTokens,
    signature: snapshotSignature(snapshot, settings.quantumTokens),
  };
}
