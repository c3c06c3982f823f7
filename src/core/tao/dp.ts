/*
 * Exact joint placement by dynamic programming over (candidates × quantised remaining
 * capacity of every engine). A state is the vector of quanta still free per engine,
 * packed in mixed radix; stage k decides candidate k (left out, or on one of its
 * engines) given the state, and the value is the best objective of candidates k..n-1.
 * Going backwards and then reconstructing forwards, taking at each candidate the
 * best-ranked decision that still reaches the optimum, yields the optimum plan that
 * comes first in the total order of objective.ts (earlier candidates' decisions
 * decide ties).
 *
 * The objective (credit, ready, tokens) is kept as two exact doubles:
 *   hi = credit · (n + 1) + ready   (ready sums to at most n, so hi orders like the pair)
 *   lo = tokens
 * Time O(stateSpace · (engines + 1)), memory stateSpace bytes of decisions plus four
 * arrays of Π(quanta + 1) doubles.
 */

import type { PlacementProblem } from "./problem.js";

/** Per candidate: the index of its chosen engine in `choices`, or -1 when left out. */
export type Decisions = number[];

export function solveExact(problem: PlacementProblem): Decisions {
  const { candidates, dpUnits } = problem;
  const n = candidates.length;
  if (n === 0) return [];

  // Mixed radix over the engines with quanta to give; the others add no state.
  const stride: number[] = dpUnits.map(() => 0);
  let states = 1;
  dpUnits.forEach((units, engine) => {
    if (units <= 0) return;
    stride[engine] = states;
    states *= units + 1;
  });

  const readyScale = n + 1;
  let maxHi = 0;
  for (const candidate of candidates) maxHi += (candidate.choices[0]?.credit ?? 0) * readyScale + candidate.ready;
  if (!(maxHi < Number.MAX_SAFE_INTEGER)) throw new RangeError("credit totals too large for an exact plan objective");

  const decisions = new Uint8Array(n * states);
  let nextHi = new Float64Array(states);
  let nextLo = new Float64Array(states);
  let curHi = new Float64Array(states);
  let curLo = new Float64Array(states);

  for (let k = n - 1; k >= 0; k--) {
    const candidate = candidates[k] as (typeof candidates)[number];
    const units = candidate.units;
    const tokens = candidate.tokens;
    const decided = decisions.subarray(k * states, (k + 1) * states);
    // Leaving the candidate out is the default; each engine, in decision rank, replaces
    // it where strictly better, or equal and still "left out" (admission ranks first).
    curHi.set(nextHi);
    curLo.set(nextLo);
    candidate.choices.forEach((choice, j) => {
      const step = stride[choice.engine] as number;
      const block = step * ((dpUnits[choice.engine] as number) + 1);
      const shift = units * step;
      const gainHi = choice.credit * readyScale + candidate.ready;
      const mark = j + 1;
      // States where this engine still has `units` quanta free: the upper part of each block.
      for (let base = 0; base < states; base += block) {
        const end = base + block;
        for (let s = base + shift; s < end; s++) {
          const hi = (nextHi[s - shift] as number) + gainHi;
          const have = curHi[s] as number;
          if (hi < have) continue;
          const lo = (nextLo[s - shift] as number) + tokens;
          if (hi > have || lo > (curLo[s] as number) || (lo === curLo[s] && decided[s] === 0)) {
            curHi[s] = hi;
            curLo[s] = lo;
            decided[s] = mark;
          }
        }
      }
    });
    [nextHi, curHi] = [curHi, nextHi];
    [nextLo, curLo] = [curLo, nextLo];
  }

  // Forward: start with every quantum free (the last state) and follow the decisions.
  const out: Decisions = [];
  let state = states - 1;
  for (let k = 0; k < n; k++) {
    const decision = decisions[k * states + state] as number;
    if (decision === 0) {
      out.push(-1);
      continue;
    }
    out.push(decision - 1);
    state -= choiceShiftOf(problem, k, decision - 1, stride);
  }
  return out;
}

function choiceShiftOf(problem: PlacementProblem, k: number, j: number, stride: number[]): number {
  const candidate = problem.candidates[k] as PlacementProblem["candidates"][number];
  const choice = candidate.choices[j] as (typeof candidate.choices)[number];
  return candidate.units * (stride[choice.engine] as number);
}
