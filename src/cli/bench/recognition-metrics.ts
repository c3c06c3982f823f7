/*
 * Scores of a program assignment against the ground truth, for `npm run
 * bench:recognition` (pure).
 *
 * Pairwise precision and recall over pairs of calls: precision is the share of pairs
 * assigned the same program that truly share one, recall the share of truly-sharing
 * pairs assigned the same program. Both come from the contingency table of (truth,
 * assigned) counts — Σ C(n_ij, 2) over Σ C(a_j, 2) and Σ C(t_i, 2) — in O(calls), not
 * O(calls²). A side with no pair scores 1 (nothing to get wrong).
 */

import type { AgentTrace } from "../../sim/workload/agent-traces.js";

/** truth program → assigned program → calls. */
export type Contingency = Map<string, Map<string, number>>;

export function contingencyOf(truth: readonly string[], assigned: readonly string[]): Contingency {
  if (truth.length !== assigned.length) throw new RangeError(`truth has ${truth.length} calls, assigned ${assigned.length}`);
  const table: Contingency = new Map();
  truth.forEach((t, i) => {
    const a = assigned[i] as string;
    let row = table.get(t);
    if (row === undefined) table.set(t, (row = new Map()));
    row.set(a, (row.get(a) ?? 0) + 1);
  });
  return table;
}

const pairs = (n: number) => (n * (n - 1)) / 2;

export interface PairCounts {
  /** Pairs of calls that truly share a program. */
  truth: number;
  /** Pairs assigned the same program. */
  assigned: number;
  /** Pairs both. */
  both: number;
}

export function pairCounts(table: Contingency): PairCounts {
  const assignedSizes = new Map<string, number>();
  let truth = 0;
  let both = 0;
  for (const row of table.values()) {
    let size = 0;
    for (const [a, n] of row) {
      size += n;
      both += pairs(n);
      assignedSizes.set(a, (assignedSizes.get(a) ?? 0) + n);
    }
    truth += pairs(size);
  }
  let assigned = 0;
  for (const n of assignedSizes.values()) assigned += pairs(n);
  return { truth, assigned, both };
}

export function addPairCounts(x: PairCounts, y: PairCounts): PairCounts {
  return { truth: x.truth + y.truth, assigned: x.assigned + y.assigned, both: x.both + y.both };
}

export interface PairScores {
  precision: number;
  recall: number;
}

export function pairScores(counts: PairCounts): PairScores {
  return {
    precision: counts.assigned === 0 ? 1 : counts.both / counts.assigned,
    recall: counts.truth === 0 ? 1 : counts.both / counts.truth,
  };
}

/** Pairwise precision and recall of `assigned` against `truth` (one entry per call). */
export function pairwise(truth: readonly string[], assigned: readonly string[]): PairScores & PairCounts {
  const counts = pairCounts(contingencyOf(truth, assigned));
  return { ...counts, ...pairScores(counts) };
}

export type How = "new" | "continuation" | "fork" | "retry";

/**
 * Whether each call's decision was right: an agent's first call started a new
 * program; any other call joined the program its true predecessor (the call it
 * continues, forks from or retries) was assigned. Local: one wrong decision does not
 * make the calls after it wrong.
 */
export function decisions(trace: AgentTrace, assigned: readonly string[], how: readonly How[]): boolean[] {
  return trace.calls.map((call) => {
    if (call.parent === undefined) return how[call.index] === "new";
    return how[call.index] !== "new" && assigned[call.index] === assigned[call.parent];
  });
}
