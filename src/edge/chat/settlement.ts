import { type Usage, usageCounts } from "../../protocol/chat.js";
import type { PoolCallStats } from "../../protocol/stats.js";
import type { CallStatus } from "../db/schema.js";
import type { SettleCallInput } from "../program/types.js";

/** What the edge saw of one call, from which its settlement is derived. */
export interface CallObservation {
  status: CallStatus;
  /** The pool accepted the call (2xx): the engine worked on it. */
  served: boolean;
  /** Usage as the engine reported it, when it did. */
  usage?: Usage;
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

/**
 * The settlement of a call. The engine's own usage and the pool's stats win;
 * without them (client gone mid-stream, pool broke off) a served call is charged
 * the prompt estimate and one completion token per output chunk relayed, and an
 * unserved one nothing. Service then falls back to what the edge measured.
 */
export function settlementOf(callId: string, seen: CallObservation): SettleCallInput {
  const counts = seen.usage
    ? usageCounts(seen.usage)
    : seen.served
      ? { prompt: seen.promptEstimate, cached: 0, completion: seen.outputChunks }
      : { prompt: 0, cached: 0, completion: 0 };
  const timing = seen.stats ?? seen.observedTiming;
  return {
    callId,
    status: seen.status,
    promptTokens: counts.prompt,
    cachedTokens: Math.min(counts.cached, counts.prompt),
    completionTokens: counts.completion,
    serviceMs: Math.max(0, timing.serviceMs),
    queueMs: Math.max(0, timing.queueMs),
    engine: seen.stats?.engine ?? "",
    finishedAt: seen.finishedAt,
  };
}
