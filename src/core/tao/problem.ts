/*
 * The snapshot turned into a placement problem: who may go where, in quanta.
 *
 * Eligibility: a program with a queued call may go to any engine with room; a program
 * in a tool phase that is ready soon may only RESERVE, and only on its cache engine
 * (largest credit), since holding capacity elsewhere saves nothing; any other program
 * is not placed. A program that fits on none of its engines is not a candidate.
 *
 * The DP's dimensions: engine e offers min(⌊free_e / Δ⌋, Σ units of candidates that
 * may use e) quanta (capacity nobody can use is no state), and the state space is
 *   stateSpace = candidates × Π_e (quanta_e + 1).
 */

import type { CandidateKey, PlanObjective } from "./objective.js";
import { cacheEngineIndex, capacityUnits, creditTokens, demandUnits, type TaoProgram, type TaoSnapshot } from "./snapshot.js";

export type EntryKind = "dispatch" | "reserve";

export interface Choice {
  /** Index into snapshot.engines. */
  engine: number;
  /** Whole credit tokens on that engine. */
  credit: number;
}

export interface Candidate {
  /** Index into snapshot.programs. */
  programIndex: number;
  program: TaoProgram;
  kind: EntryKind;
  units: number;
  ready: 0 | 1;
  tokens: number;
  /** Engines it fits on, best decision first (credit, then free tokens, then engine order). */
  choices: Choice[];
}

export interface PlacementProblem {
  snapshot: TaoSnapshot;
  quantumTokens: number;
  candidates: Candidate[];
  /** ⌊free / Δ⌋ per snapshot engine. */
  engineUnits: number[];
  /** The DP's quanta per engine: engineUnits capped at the demand that may use the engine. */
  dpUnits: number[];
  stateSpace: number;
}

export function buildProblem(snapshot: TaoSnapshot, quantumTokens: number): PlacementProblem {
  const engines = snapshot.engines;
  const engineUnits = engines.map((engine) => capacityUnits(engine.freeTokens, quantumTokens));
  const candidates: Candidate[] = [];
  snapshot.programs.forEach((program, programIndex) => {
    const units = demandUnits(program.tokens, quantumTokens);
    let allowed: number[];
    let kind: EntryKind;
    if (program.queued) {
      kind = "dispatch";
      allowed = engines.map((_, index) => index);
    } else if (program.ready) {
      kind = "reserve";
      const cache = cacheEngineIndex(program, engines);
      allowed = cache < 0 ? [] : [cache];
    } else {
      return;
    }
    const choices = allowed
      .filter((engine) => (engineUnits[engine] as number) >= units)
      .map((engine) => ({ engine, credit: creditTokens(program, (engines[engine] as { engineId: string }).engineId) }))
      .sort(
        (a, b) =>
          b.credit - a.credit ||
          (engines[b.engine]?.freeTokens ?? 0) - (engines[a.engine]?.freeTokens ?? 0) ||
          a.engine - b.engine,
      );
    if (choices.length === 0) return;
    candidates.push({ programIndex, program, kind, units, ready: program.ready ? 1 : 0, tokens: program.tokens, choices });
  });

  const demand = engines.map(() => 0);
  for (const candidate of candidates) {
    for (const choice of candidate.choices) demand[choice.engine] = (demand[choice.engine] as number) + candidate.units;
  }
  const dpUnits = engineUnits.map((units, engine) => Math.min(units, demand[engine] as number));
  let stateSpace = candidates.length;
  for (const units of dpUnits) stateSpace *= units + 1;
  return { snapshot, quantumTokens, candidates, engineUnits, dpUnits, stateSpace };
}

/** The candidate order's key for this choice. */
export function candidateKey(candidate: Candidate, choice: Choice): CandidateKey {
  return { credit: choice.credit, ready: candidate.ready === 1, tokens: candidate.tokens, programRank: candidate.programIndex, engineRank: choice.engine };
}

/**
 * Every candidate at its best choice: no plan does better (each entry's triple is at
 * most its program's best, and leaving one out adds nothing), so a plan reaching this
 * is optimal.
 */
export function upperBound(problem: PlacementProblem): PlanObjective {
  const bound = { credit: 0, ready: 0, tokens: 0 };
  for (const candidate of problem.candidates) {
    const best = candidate.choices[0] as Choice;
    bound.credit += best.credit;
    bound.ready += candidate.ready;
    bound.tokens += candidate.tokens;
  }
  return bound;
}
