import type { PoolCore } from "../core/pool-core.js";
import type { QueuedCall } from "../core/queue.js";
import { type KvLinkProfile, kvTransferMs } from "../sim/kv-links.js";

/*
 * How long a split call's decode is expected to take from its hand-off (issue 13), for
 * the retention planner's keep of the prefill copy (RetentionPlanner.prefillHandedOff):
 * the prompt's KV over the prefill engine's link (sim/kv-links.ts, from its profile),
 * then one decode step per expected output token at the decode engine's projected step
 * (admission's cost model, with the batch it now runs; the output admission expects:
 * the program's recent mean, capped by max_tokens). What the pool does not know is
 * taken slow, so the keep errs long (the planner caps it):
 */

/**
 * Link of a prefill engine without a profile: Llama 3.1 70B's KV (320 KiB a token) over a
 * 400 Gb/s NIC across nodes (50 GB/s), the slowest pair kv-links.ts describes (host
 * link: A100's PCIe, its slowest; unused here).
 */
export const DEFAULT_HANDOFF_LINK: KvLinkProfile = Object.freeze({ kvBytesPerToken: 320 * 1024, engineLinkGBps: 50, hostLinkGBps: 32 });

/** Per-token step of a decode engine without a cost model: above every profile's floor (70B on 4 H100s: 18.5 ms) under a loaded batch. */
export const DEFAULT_DECODE_STEP_MS = 50;

export interface HandoffFacts {
  promptTokens: number;
  outputTokens: number;
  /** The prefill engine's link; undefined: DEFAULT_HANDOFF_LINK. */
  link: KvLinkProfile | undefined;
  /** The decode engine's expected step (ms a token); undefined: DEFAULT_DECODE_STEP_MS. */
  decodeStepMs: number | undefined;
}

/** Expected ms from hand-off to the decode's end: the transfer, then the output's decode steps. */
export function expectedHandoffMs(facts: HandoffFacts): number {
  const transferMs = kvTransferMs(facts.link ?? DEFAULT_HANDOFF_LINK, facts.promptTokens, "engine");
  return transferMs + Math.max(0, facts.outputTokens) * (facts.decodeStepMs ?? DEFAULT_DECODE_STEP_MS);
}

/** What the pool knows of the call's hand-off to `decodeEngineId` (its decode already recorded there). */
export function handoffFactsOf(core: PoolCore, call: QueuedCall, decodeEngineId: string, link: HandoffFacts["link"]): HandoffFacts {
  const decode = core.engine(decodeEngineId);
  return {
    promptTokens: call.promptTokens,
    outputTokens: core.kv.expectedOutputTokens(call),
    link,
    decodeStepMs: decode === undefined ? undefined : core.kv.projectedStepMs(decode),
  };
}
