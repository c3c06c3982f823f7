/*
 * Building a planner snapshot from the core's own state: the program queue's calls,
 * the readiness predictor, the cache-credit ledger and the engines' state. Both the
 * pool and the simulator use this, so the rule is written once.
 *
 * A program's queued calls become one item (parallel calls of one program share its
 * prefix, so they go to one engine together): tokens = Σ (prompt + output allowance).
 * A program in a tool phase becomes a reservation item only when it is ready soon
 * (asking uses its probe, see readiness.ts), with its context as the tokens to hold.
 */

import { type EngineState, isAvailable, type SaturationSettings } from "../engines.js";
import type { QueuedCall } from "../queue.js";
import type { CacheCreditLedger } from "./cache-credit.js";
import type { ReadinessPredictor } from "./readiness.js";
import { MAX_PROGRAM_TOKENS, type TaoEngine, type TaoProgram, type TaoSnapshot } from "./snapshot.js";

/** KV tokens the planner may fill: the headroom below `kvCeiling` (default the saturation threshold); 0 when unavailable. */
export function engineFreeTokens(engine: EngineState, kvCapacityTokens: number, saturation: SaturationSettings, kvCeiling = saturation.maxKvUsage): number {
  if (!(kvCapacityTokens >= 0) || !Number.isFinite(kvCapacityTokens)) throw new RangeError(`kvCapacityTokens must be a finite number >= 0, got ${kvCapacityTokens}`);
  // Availability without the scraped-KV rule: the ceiling given here is the KV limit.
  if (!isAvailable(engine, { ...saturation, maxKvUsage: Infinity })) return 0;
  return Math.floor(Math.max(0, kvCeiling - engine.kvUsage) * kvCapacityTokens);
}

export interface SnapshotSources {
  at: number;
  /** Queued calls in priority order (first = served first), e.g. ProgramQueue.peekOrder(). */
  queued: readonly QueuedCall[];
  /** Programs between calls (no queued call), with the context tokens their next call will need. */
  betweenCalls: readonly { programId: string; contextTokens: number }[];
  engines: readonly TaoEngine[];
  readiness: ReadinessPredictor;
  credits: CacheCreditLedger;
  /** KV tokens a call needs beyond its prompt (its output); default 0. */
  outputAllowanceTokens?: number;
}

function clampTokens(tokens: number): number {
  return Math.min(MAX_PROGRAM_TOKENS, Math.max(1, Math.ceil(tokens)));
}

export function buildSnapshot(sources: SnapshotSources): TaoSnapshot {
  const allowance = sources.outputAllowanceTokens ?? 0;
  if (!Number.isFinite(allowance) || allowance < 0) throw new RangeError(`outputAllowanceTokens must be a finite number >= 0, got ${allowance}`);
  const at = sources.at;
  const engineIds = sources.engines.map((engine) => engine.engineId);
  const creditOf = (programId: string): Record<string, number> => {
    const credit: Record<string, number> = {};
    for (const engineId of engineIds) {
      const value = sources.credits.credit(programId, engineId, at);
      if (value > 0) credit[engineId] = value;
    }
    return credit;
  };

  const byProgram = new Map<string, TaoProgram>();
  for (const call of sources.queued) {
    const existing = byProgram.get(call.programId);
    const tokens = call.promptTokens + allowance;
    if (existing !== undefined) {
      existing.tokens = clampTokens(existing.tokens + tokens);
      continue;
    }
    byProgram.set(call.programId, { programId: call.programId, tokens: clampTokens(tokens), queued: true, ready: true, credit: creditOf(call.programId) });
  }
  for (const { programId, contextTokens } of sources.betweenCalls) {
    if (byProgram.has(programId) || !sources.readiness.isReadySoon(programId, at)) continue;
    byProgram.set(programId, { programId, tokens: clampTokens(contextTokens + allowance), queued: false, ready: true, credit: creditOf(programId) });
  }
  return { at, programs: [...byProgram.values()], engines: sources.engines.map((engine) => ({ ...engine })) };
}
