import { type Usage, usageCounts } from "../../protocol/chat.js";
import type { PoolCallStats } from "../../protocol/stats.js";
import type { CallStatus, UsageSource } from "../db/schema.js";
import type { SettleCallInput } from "../program/types.js";

/** What the edge saw of one call, from which its settlement is derived. */
export interface CallObservation {
  status: CallStatus;
  /** The pool accepted the call (2xx): the engine worked on it. */
  served: boolean;
  /** Usage as the engine reported it for the whole call, when it did. */
  usage?: Usage;
  /** The engine's per-chunk usage up to the last chunk relayed, when the whole figure never came. */
  partialUsage?: Usage;
  /** The pool's figures (headers or stats comment), when they arrived. */
  stats?: PoolCallStats;
  /** estimatePromptTokens of the request, charged when a served call reported no usage. */
  promptEstimate: number;
  /** Output-carrying chunks relayed, charged as completion tokens when a served call reported no usage. */
  outputChunks: number;
  /** Edge-measured timing, used when the pool's stats are missing (a cut stream). */
  observedTiming: { queueMs: number; serviceMs: number };
  finishedAt: number;
}

function countsOf(seen: CallObservation): { counts: ReturnType<typeof usageCounts>; source: UsageSource } {
  if (seen.usage) return { counts: usageCounts(seen.usage), source: "engine" };
  if (seen.partialUsage) {
    const counts = usageCounts(seen.partialUsage);
    // A chunk relayed after the last usage figure still cost a token at least.
    return { counts: { ...counts, completion: Math.max(counts.completion, seen.outputChunks) }, source: "engine_partial" };
  }
  if (seen.served) return { counts: { prompt: seen.promptEstimate, cached: 0, completion: seen.outputChunks }, source: "estimate" };
  return { counts: { prompt: 0, cached: 0, completion: 0 }, source: "none" };
}

/**
 * The settlement of a call. The engine's own usage and the pool's stats win;
 * a stream cut short is charged the engine's per-chunk count up to its last
 * relayed chunk when the engine gave one; without any engine figure a served
 * call is charged the prompt estimate and one completion token per output chunk
 * relayed, and an unserved one nothing. `usageSource` says which applied, so the
 * ledger shows every estimate. Service falls back to what the edge measured.
 */
export function settlementOf(callId: string, seen: CallObservation): SettleCallInput {
  const { counts, source } = countsOf(seen);
  const timing = seen.stats ?? seen.observedTiming;
  return {
    callId,
    status: seen.status,
    promptTokens: counts.prompt,
    cachedTokens: Math.min(counts.cached, counts.prompt),
    completionTokens: counts.completion,
    usageSource: source,
    serviceMs: Math.max(0, timing.serviceMs),
    queueMs: Math.max(0, timing.queueMs),
    engine: seen.stats?.engine ?? "",
    finishedAt: seen.finishedAt,
  };
}
