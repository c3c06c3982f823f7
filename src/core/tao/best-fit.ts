/*
 * Best-fit-decreasing, the fallback when the DP's state space passes the budget:
 * every (candidate, engine) pair sorted in candidate order (credit on that engine,
 * readiness, tokens: all descending; then priority order), each candidate placed at
 * its first pair that fits. Among a candidate's engines of equal credit, the one left
 * with the least free quanta (best fit), then the better-ranked choice. Credit first
 * means a program whose cache engine is full still gets an engine, after the programs
 * that can reuse their cache were served. O(P log P) for P pairs.
 */

import type { Decisions } from "./dp.js";
import { compareCandidates } from "./objective.js";
import { candidateKey, type PlacementProblem } from "./problem.js";

interface Pair {
  candidate: number;
  choice: number;
  key: ReturnType<typeof candidateKey>;
}

export function bestFitDecreasing(problem: PlacementProblem): Decisions {
  const { candidates } = problem;
  const pairs: Pair[] = [];
  candidates.forEach((candidate, c) => {
    candidate.choices.forEach((choice, j) => pairs.push({ candidate: c, choice: j, key: candidateKey(candidate, choice) }));
  });
  pairs.sort((a, b) => compareCandidates(a.key, b.key));

  const remaining = [...problem.engineUnits];
  const decisions: Decisions = candidates.map(() => -1);
  for (let i = 0; i < pairs.length; ) {
    const first = pairs[i] as Pair;
    let end = i + 1;
    while (end < pairs.length && (pairs[end] as Pair).candidate === first.candidate && (pairs[end] as Pair).key.credit === first.key.credit) end++;
    if (decisions[first.candidate] === -1) {
      const candidate = candidates[first.candidate] as PlacementProblem["candidates"][number];
      let best: Pair | undefined;
      let bestLeft = Number.POSITIVE_INFINITY;
      for (let p = i; p < end; p++) {
        const pair = pairs[p] as Pair;
        const engine = (candidate.choices[pair.choice] as { engine: number }).engine;
        const left = (remaining[engine] as number) - candidate.units;
        if (left < 0) continue;
        if (left < bestLeft || (left === bestLeft && best !== undefined && pair.choice < best.choice)) {
          best = pair;
          bestLeft = left;
        }
      }
      if (best !== undefined) {
        const engine = (candidate.choices[best.choice] as { engine: number }).engine;
        remaining[engine] = bestLeft;
        decisions[first.candidate] = best.choice;
      }
    }
    i = end;
  }
  return decisions;
}
