import type { RetainedContext } from "./kv-retention-index.js";
import { outputWordIndex } from "./output-text.js";
import { BlockHasher } from "./token-hash.js";

/** Lifecycle of a request inside the engine model. */
export const SequenceState = {
  waiting: 0,
  running: 1,
  finished: 2,
  aborted: 3,
  /** Blocks held for a remote prefill's KV, which is on its way (vLLM's WAITING_FOR_REMOTE_KVS). */
  pullingKv: 4,
} as const;
export type SequenceState = (typeof SequenceState)[keyof typeof SequenceState];

export type FinishReason = "stop" | "length";

/** Where a remote prefill's KV stands for the request that decodes it here (EngineRequest.remoteKv). */
export interface RemoteKvPull {
  /** The caller reports the pull's end (EngineModel.kvPullDone); else it ends by the engine's clock with the whole prompt. */
  readonly reported: boolean;
  /** room: waiting for blocks for the whole prompt; pulling: blocks held, the KV on its way; landed: in (or failed), computed locally from then on. */
  phase: "room" | "pulling" | "landed";
  /** When the blocks were allocated and the pull started, and when its transfer ends (ms). */
  startMs: number;
  landsAtMs: number;
  /** Prompt tokens asked for (the prompt past the engine's own cached prefix). */
  tokens: number;
  /** Prompt tokens whose KV arrived valid, from the first: undefined until a reported pull is reported. */
  arrivedTokens: number | undefined;
  /** Waiting for room (arrival → pull start) and for the KV (pull start → schedulable), ms. */
  roomWaitMs: number;
  kvWaitMs: number;
}

export interface SequenceInit {
  id: string;
  priority: number;
  arrivalMs: number;
  order: number;
  promptTokens: readonly string[];
  blockHashes: number[];
  seed: number;
  targetOutput: number;
  finishReason: FinishReason;
}

const hasher = new BlockHasher();

/**
 * One request's mutable state, vLLM V1 style: the sequence is prompt + generated
 * tokens, `numComputed` of them are in the KV cache, and a step schedules the rest
 * (a prefill chunk, a recompute after preemption, or the one decode token).
 */
export class Sequence {
  readonly id: string;
  readonly priority: number;
  readonly arrivalMs: number;
  /** Submission counter: the tie-breaker after priority and arrival. */
  readonly order: number;
  readonly promptTokens: readonly string[];
  readonly promptLength: number;
  /** Hashes of the full blocks known so far (prompt first, generated blocks appended). */
  readonly blockHashes: number[];
  readonly seed: number;
  readonly targetOutput: number;
  readonly finishReason: FinishReason;

  state: SequenceState = SequenceState.waiting;
  outputCount = 0;
  numComputed = 0;
  /** KV block ids, in sequence order. */
  readonly blocks: number[] = [];
  /** Leading blocks already registered in the prefix cache. */
  registeredBlocks = 0;
  /** Prompt tokens served from the cache at first scheduling (vLLM's num_cached_tokens); -1 before. */
  cachedTokens = -1;
  /** Tokens scheduled in the current step. */
  scheduledTokens = 0;
  firstTokenMs = -1;
  preemptions = 0;
  /** Tokens computed in prefill chunks (not decode steps): the prompt past the cache, recomputes after preemption. */
  prefillTokens = 0;
  /** The context its KV belongs to (a retention tag), if the caller named one. */
  retention: RetainedContext | undefined = undefined;
  /** Its prompt's KV comes from the engine that prefilled it (a disaggregated call's decode). */
  remoteKv: RemoteKvPull | undefined = undefined;

  constructor(init: SequenceInit) {
    this.id = init.id;
    this.priority = init.priority;
    this.arrivalMs = init.arrivalMs;
    this.order = init.order;
    this.promptTokens = init.promptTokens;
    this.promptLength = init.promptTokens.length;
    this.blockHashes = init.blockHashes;
    this.seed = init.seed;
    this.targetOutput = init.targetOutput;
    this.finishReason = init.finishReason;
  }

  /** Prompt plus tokens generated so far. */
  get numTokens(): number {
    return this.promptLength + this.outputCount;
  }

  /** Extends `blockHashes` to `count` blocks; those blocks' tokens must all be known. */
  ensureBlockHashes(count: number, blockSize: number): void {
    const hashes = this.blockHashes;
    while (hashes.length < count) {
      const k = hashes.length;
      hasher.start(k > 0 ? (hashes[k - 1] ?? 0) : 0);
      const end = (k + 1) * blockSize;
      for (let pos = k * blockSize; pos < end; pos++) {
        if (pos < this.promptLength) hasher.addText(this.promptTokens[pos] ?? "");
        else hasher.addGenerated(outputWordIndex(this.seed, pos - this.promptLength));
      }
      hashes.push(hasher.finish());
    }
  }
}
