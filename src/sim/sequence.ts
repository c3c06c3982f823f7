import type { RetainedContext } from "./kv-retention-index.js";
import { outputWordIndex } from "./output-text.js";
import { BlockHasher } from "./token-hash.js";

/** Lifecycle of a request inside the engine model. */
export const SequenceState = {
  waiting: 0,
  running: 1,
  finished: 2,
  aborted: 3,
} as const;
export type SequenceState = (typeof SequenceState)[keyof typeof SequenceState];

export type FinishReason = "stop" | "length";

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
