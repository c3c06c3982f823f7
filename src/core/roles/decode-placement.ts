import type { EngineState } from "../engines.js";

/*
 * Where a disaggregated call decodes (issue 13): among the decode engines that take
 * decodes, healthy, below their count cap, the one with the most KV room left (its
 * capacity less what the pool's account projects on it), since a decode holds the whole
 * context for as long as it generates; ties go to the fewest calls, then the ID. With
 * every decode engine at its cap the least loaded still gets it: the prefill is done
 * and its KV is waiting, so holding the call back would only hold the prefill engine's
 * blocks longer. Pure.
 */

export interface DecodeCandidate {
  engine: EngineState;
  /** KV capacity (tokens) and what the account projects on the engine now. */
  capacityTokens: number;
  projectedTokens: number;
}

export function pickDecodeEngine(candidates: readonly DecodeCandidate[]): EngineState | undefined {
  const healthy = candidates.filter((c) => c.engine.healthy);
  const belowCap = healthy.filter((c) => c.engine.inFlight < c.engine.maxInFlight);
  const pool = belowCap.length > 0 ? belowCap : healthy;
  const room = (c: DecodeCandidate) => c.capacityTokens - c.projectedTokens;
  const best = [...pool].sort(
    (a, b) => room(b) - room(a) || a.engine.inFlight - b.engine.inFlight || (a.engine.id < b.engine.id ? -1 : a.engine.id > b.engine.id ? 1 : 0),
  )[0];
  return best?.engine;
}
