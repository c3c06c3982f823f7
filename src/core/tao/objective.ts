/*
 * TAO's lexicographic order, for one candidate and for a whole plan.
 *
 * Candidate (program p on engine e): the triple
 *   (credit of p on e, readiness of p ∈ {0, 1}, tokens of p),
 * all larger-is-better, compared in that order. Token count is preferred LARGER:
 *   - at equal credit and readiness, placing the longer context moves more work
 *     onto the GPUs per admission, and a long context is the one that per-call
 *     greedy placement leaves out (short calls fill the gaps it needs);
 *   - bin packing places big items first (best-fit-decreasing), small ones fill the
 *     remaining gaps.
 * The cost of favouring long contexts (short ones wait) is bounded: readiness and the
 * priority order of the queue decide first, and the plan objective below counts
 * admitted programs before tokens.
 *
 * Plan: a set of (program, engine) entries. Its objective is the sum of its entries'
 * triples, compared lexicographically:
 *   1. total credit used   Σ credit(p, e)        (prefill saved)
 *   2. ready admitted      Σ ready(p)            (programs served now or imminently)
 *   3. tokens admitted     Σ tokens(p)           (capacity used)
 * Credits are whole tokens capped at the program's tokens (snapshot.ts creditTokens),
 * so sums are exact integers and equal objectives are real ties. Among plans with an
 * equal objective the order is total and deterministic: compare the programs' decisions
 * in snapshot order; at the first program where two plans differ, the better decision
 * wins, where decisions rank: admitted beats left out, and among engines, higher
 * credit, then more free tokens in the snapshot, then earlier in snapshot.engines.
 * The DP returns the best plan of this total order; best-fit-decreasing only a good one.
 */

export interface PlanObjective {
  credit: number;
  ready: number;
  tokens: number;
}

/** > 0 when a is better, < 0 when b is better, 0 when equal. */
export function compareObjectives(a: PlanObjective, b: PlanObjective): number {
  if (a.credit !== b.credit) return a.credit - b.credit;
  if (a.ready !== b.ready) return a.ready - b.ready;
  return a.tokens - b.tokens;
}

/** One (program, engine) pair in candidate order. */
export interface CandidateKey {
  credit: number;
  ready: boolean;
  tokens: number;
  /** Position of the program in the snapshot (the queue's priority order). */
  programRank: number;
  /** Position of the engine in the snapshot. */
  engineRank: number;
}

/**
 * Candidate order: < 0 when a comes first (is better). The triple decides; exact ties
 * go to the earlier program in priority order, then the earlier engine.
 */
export function compareCandidates(a: CandidateKey, b: CandidateKey): number {
  if (a.credit !== b.credit) return b.credit - a.credit;
  if (a.ready !== b.ready) return a.ready ? -1 : 1;
  if (a.tokens !== b.tokens) return b.tokens - a.tokens;
  if (a.programRank !== b.programRank) return a.programRank - b.programRank;
  return a.engineRank - b.engineRank;
}
