import type { HostKvTier } from "./host-kv-tier.js";
import { EvictionRank, KvBlockPool } from "./kv-cache.js";
import { type KeptOrder, KvRetentionIndex, type RetentionSignal } from "./kv-retention-index.js";
import type { NodeKvLedger } from "./node-kv-ledger.js";
import { naturalOutputTokens } from "./output-text.js";
import { type EngineProfile, type EngineProfileName, resolveProfile } from "./profiles.js";
import { type FinishReason, type RemoteKvPull, Sequence, SequenceState } from "./sequence.js";
import { StepShape, stepDurationMs } from "./timing.js";
import { promptBlockHashes, promptSeed } from "./token-hash.js";
import { WaitingQueue } from "./waiting-queue.js";

/*
 * A continuous-batching inference engine as a pure state machine (vLLM V1's
 * scheduler, simplified). No clock and no timers: the caller passes `now` and
 * drives steps, so the simulated HTTP engine (real time) and the discrete-event
 * simulator (virtual time) run exactly this code.
 *
 *   submit(request, now)   queue a request
 *   startStep(now)         pick the batch; returns the step's duration, or undefined when idle
 *   finishStep(onToken?)   apply the step at now + duration; returns the events
 *   abort(id)              client went away: drop the request and free its KV blocks
 *
 * Requests submitted or aborted while a step runs take effect from the next step.
 *
 * A request whose prompt was prefilled on another engine (a disaggregated call's decode,
 * EngineRequest.remoteKv) is served as vLLM's scheduler serves one under a KV connector
 * (vllm/v1/core/sched/scheduler.py, NixlConnector's get_num_new_matched_tokens and
 * update_state_after_alloc): it waits in the queue, in its turn, until blocks for its
 * whole prompt fit; they are then its own (referenced: no admission evicts them) and the
 * pull starts (takeKvPulls says so; it lasts kvPullMs). Until the KV is in
 * (WAITING_FOR_REMOTE_KVS) it is not scheduled and takes no batch slot; then, ahead of
 * the queue (see schedule), it computes only the prompt's last token, which its logits
 * need, and decodes. A step that admits nothing else returns undefined: nextWakeMs()
 * says when to step again. A pull happens once: preempted later, the request
 * recomputes here, as vLLM's does.
 */

export interface EngineRequest {
  id: string;
  /**
   * The prompt as tokens: tokenize(renderPrompt(request)) from src/protocol/tokens.ts.
   * Kept by reference, not copied: do not change it while the request is in the
   * engine (appending for an agent's next call is harmless).
   */
  promptTokens: readonly string[];
  /**
   * promptBlockHashes(promptTokens, blockSize), when the caller already has it (a
   * simulator extending an agent's previous prompt); computed otherwise.
   */
  promptBlockHashes?: readonly number[];
  /** Completion budget; default: what fits in maxModelLen. */
  maxTokens?: number;
  /** vLLM's min_tokens: no stop before this many tokens. */
  minTokens?: number;
  /** vLLM's ignore_eos: generate exactly maxTokens. */
  ignoreEos?: boolean;
  /** Where the generation would stop on its own; default: 16..300 from the prompt's hash. */
  outputTokens?: number;
  /** vLLM semantics: lower runs first. Default 0. */
  priority?: number;
  /** The context this request's KV belongs to (issue 13's retention tag); see setRetention. */
  retentionTag?: string;
  /** Its prompt was prefilled elsewhere and its KV is pulled from there (vLLM's do_remote_prefill); see the header. */
  remoteKv?: RemoteKvRequest;
}

export interface RemoteKvRequest {
  /**
   * The caller ends the pull with kvPullDone (a real read, which can come short or fail);
   * it is in once that is reported and kvPullMs has passed. Default: the whole prompt's
   * KV is in kvPullMs after the pull starts.
   */
  reported?: boolean;
}

/** A pull the engine started (its blocks allocated at `atMs`): `tokens` of KV, in at `landsAtMs` (a reported one: and once reported). */
export interface KvPull {
  requestId: string;
  tokens: number;
  atMs: number;
  landsAtMs: number;
}

/** A remote-KV request's waits and what it pulled. */
export interface RemoteKvUsage {
  /** Prompt tokens whose KV arrived (0: the pull failed and the prompt was computed here). */
  pulledTokens: number;
  /** Arrival → blocks allocated (the engine had no room), and → the KV in and the request schedulable (ms). */
  roomWaitMs: number;
  kvWaitMs: number;
}

export interface SubmittedRequest {
  id: string;
  promptTokens: number;
  maxTokens: number;
  /** Exact number of tokens the request will generate. */
  completionTokens: number;
  finishReason: FinishReason;
  /** Seed of the generated words: outputTokenText(seed, index). */
  seed: number;
}

export interface RequestUsage {
  promptTokens: number;
  /** Prompt tokens served from the prefix cache at first scheduling (whole blocks). */
  cachedTokens: number;
  completionTokens: number;
}

/** Latency samples of a finished request, in the caller's time unit (ms). */
export interface RequestTiming {
  arrivalMs: number;
  firstTokenMs: number;
  finishedMs: number;
  ttftMs: number;
  /** Mean time per output token after the first; undefined for a one-token output. */
  tpotMs: number | undefined;
  e2eMs: number;
}

export type EngineEvent =
  | { type: "preempted"; requestId: string; atMs: number }
  | { type: "first_token"; requestId: string; atMs: number }
  | {
      type: "finished";
      requestId: string;
      atMs: number;
      finishReason: FinishReason;
      usage: RequestUsage;
      timing: RequestTiming;
      preemptions: number;
      /** Tokens it computed in prefill chunks, not decode steps: its prompt past the cache, and every recompute after a preemption. */
      prefillTokens: number;
      /** A remote-KV request's (EngineRequest.remoteKv). */
      remoteKv?: RemoteKvUsage;
    };

export type FinishedEvent = Extract<EngineEvent, { type: "finished" }>;

/** Called once per generated token, in step order; `index` is 0-based within the request. */
export type TokenListener = (requestId: string, index: number) => void;

export interface EngineStats {
  running: number;
  waiting: number;
  /** Fraction of KV blocks referenced by requests (0..1). */
  kvUsage: number;
  kvBlocksFree: number;
  cachedBlocks: number;
  /** Prompt tokens looked up in the prefix cache, and how many were found (tokens). */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  preemptions: number;
  /** Prompt tokens of admitted requests (counted once per request). */
  promptTokens: number;
  generationTokens: number;
  finished: number;
  aborted: number;
  steps: number;
  busyMs: number;
  /** Prompt tokens reloaded from the node's host tier instead of computed. */
  hostHitTokens: number;
  /** Prompt tokens computed whose KV the node had computed before (on any engine): the waste the host tier and retention attack. */
  recomputedTokens: number;
  /** KV bytes over PCIe: reloads (host → GPU) and evicted blocks written to the host tier (GPU → host). */
  hostLoadBytes: number;
  hostStoreBytes: number;
  /** Retention hints that named a context the engine holds, by action. */
  keepsApplied: number;
  normalsApplied: number;
  dropsApplied: number;
  /** Cached blocks evicted, by the free queue they left: a dropped context's (what drops free first), an ordinary one's (LRU), a kept one's. */
  evictedDroppedBlocks: number;
  evictedOrdinaryBlocks: number;
  evictedKeptBlocks: number;
  /** Remote-KV requests (disaggregated decodes): pulls started, pulls that came short or failed, prompt tokens pulled. */
  remoteKvPulls: number;
  remoteKvShortPulls: number;
  remoteKvPulledTokens: number;
  /** Prompt tokens they computed past the last one (after a preemption, or a pull that came short): the handed-over KV recomputed. */
  remoteKvRecomputedTokens: number;
  /** Their time waiting for blocks, and for the KV once it had them (ms, summed). */
  remoteKvRoomWaitMs: number;
  remoteKvWaitMs: number;
}

export interface EngineModelOptions {
  profile?: EngineProfileName | EngineProfile;
  /** Default: the profile's (vLLM: 128). */
  maxNumSeqs?: number;
  /** Default: the profile's (vLLM: 2,048). */
  maxBatchedTokens?: number;
  /** Waiting order by priority then arrival (vLLM --scheduling-policy priority); else FCFS. Default true. */
  priorityScheduling?: boolean;
  /** The node's host-memory KV tier, shared with the node's other engines (issue 13). */
  hostTier?: HostKvTier;
  /** What the node has computed, shared likewise: counts recomputed tokens. */
  nodeLedger?: NodeKvLedger;
  /** How kept contexts are ordered for eviction among themselves (default furthest-return). */
  keptOrder?: KeptOrder;
  /** How long pulling `tokens` tokens of a remote prefill's KV takes (ms; the engine link, kv-links.ts). Default: no time. */
  kvPullMs?: (tokens: number) => number;
}

/** A request the engine refuses, with the offending field (vLLM answers 400). */
export class EngineRequestError extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = "EngineRequestError";
  }
}

function positiveInt(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${what} must be a positive integer`);
  return value;
}

export class EngineModel {
  readonly profile: EngineProfile;
  readonly maxNumSeqs: number;
  readonly maxBatchedTokens: number;
  readonly priorityScheduling: boolean;

  private readonly blockSize: number;
  private readonly kv: KvBlockPool;
  private readonly retention: KvRetentionIndex;
  private readonly hostTier: HostKvTier | undefined;
  private readonly nodeLedger: NodeKvLedger | undefined;
  private readonly kvPullMs: (tokens: number) => number;
  /** Remote-KV requests holding their blocks while the KV comes, and once it is in until scheduled (both counted as waiting). */
  private readonly pulling: Sequence[] = [];
  private readonly landed: Sequence[] = [];
  /** Pulls started since takeKvPulls() last looked. */
  private startedPulls: KvPull[] = [];
  /** The latest time the caller gave (an eviction has no time of its own). */
  private clockMs = 0;
  /** Tokens reloaded from the host tier for the step being scheduled. */
  private stepLoadTokens = 0;
  private readonly requests = new Map<string, Sequence>();
  private readonly waiting: WaitingQueue<Sequence>;
  private waitingCount = 0;
  private readonly running: Sequence[] = [];
  private readonly scheduled: Sequence[] = [];
  private readonly shape = new StepShape();
  private readonly hitBlocks: number[] = [];
  private pendingEvents: EngineEvent[] = [];
  private submitted = 0;
  private stepActive = false;
  private stepStartMs = 0;
  private stepEndMs = 0;
  private readonly counters = {
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    preemptions: 0,
    promptTokens: 0,
    generationTokens: 0,
    finished: 0,
    aborted: 0,
    steps: 0,
    busyMs: 0,
    hostHitTokens: 0,
    recomputedTokens: 0,
    hostLoadBytes: 0,
    hostStoreBytes: 0,
    keepsApplied: 0,
    normalsApplied: 0,
    dropsApplied: 0,
    evictedDroppedBlocks: 0,
    evictedOrdinaryBlocks: 0,
    evictedKeptBlocks: 0,
    remoteKvPulls: 0,
    remoteKvShortPulls: 0,
    remoteKvPulledTokens: 0,
    remoteKvRecomputedTokens: 0,
    remoteKvRoomWaitMs: 0,
    remoteKvWaitMs: 0,
  };

  constructor(options: EngineModelOptions = {}) {
    this.profile = resolveProfile(options.profile);
    this.blockSize = positiveInt(this.profile.blockSize, "blockSize");
    this.maxNumSeqs = positiveInt(options.maxNumSeqs ?? this.profile.maxNumSeqs, "maxNumSeqs");
    this.maxBatchedTokens = positiveInt(options.maxBatchedTokens ?? this.profile.maxBatchedTokens, "maxBatchedTokens");
    this.priorityScheduling = options.priorityScheduling ?? true;
    positiveInt(this.profile.maxModelLen, "maxModelLen");
    // A lone request must always fit, or a full-length one could wait forever.
    if (this.profile.maxModelLen > this.profile.kvBlocks * this.blockSize) {
      throw new RangeError("maxModelLen exceeds the KV cache capacity");
    }
    this.kv = new KvBlockPool(this.profile.kvBlocks);
    this.retention = new KvRetentionIndex(this.kv, options.keptOrder);
    this.hostTier = options.hostTier;
    this.nodeLedger = options.nodeLedger;
    this.kvPullMs = options.kvPullMs ?? (() => 0);
    if (this.hostTier !== undefined && this.hostTier.blockSize !== this.blockSize) throw new RangeError("the host tier's block size must be the engine's");
    this.kv.onEviction((block, hash) => this.evicting(block, hash));
    const isWaiting = (s: Sequence) => s.state === SequenceState.waiting;
    const before = this.priorityScheduling
      ? (a: Sequence, b: Sequence) =>
          a.priority !== b.priority ? a.priority < b.priority : a.arrivalMs !== b.arrivalMs ? a.arrivalMs < b.arrivalMs : a.order < b.order
      : (a: Sequence, b: Sequence) => (a.arrivalMs !== b.arrivalMs ? a.arrivalMs < b.arrivalMs : a.order < b.order);
    this.waiting = new WaitingQueue(before, isWaiting);
  }

  /** Queues a request; throws EngineRequestError for one vLLM would reject. */
  submit(request: EngineRequest, nowMs: number): SubmittedRequest {
    this.clockMs = Math.max(this.clockMs, nowMs);
    const { id, promptTokens } = request;
    if (id.length === 0) throw new EngineRequestError("request id must not be empty");
    if (this.requests.has(id)) throw new EngineRequestError(`duplicate request id ${id}`);
    const promptLength = promptTokens.length;
    const { maxModelLen } = this.profile;
    if (promptLength < 1) throw new EngineRequestError("The prompt must not be empty.", "messages");
    if (promptLength >= maxModelLen) {
      throw new EngineRequestError(
        `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptLength} input tokens. Please reduce the length of the input messages.`,
        "messages",
      );
    }
    const maxTokens = request.maxTokens ?? maxModelLen - promptLength;
    if (!Number.isInteger(maxTokens) || maxTokens < 1) {
      throw new EngineRequestError("max_tokens must be at least 1.", "max_tokens");
    }
    if (promptLength + maxTokens > maxModelLen) {
      throw new EngineRequestError(
        `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${maxModelLen} tokens and your request has ${promptLength} input tokens (${maxTokens} > ${maxModelLen} - ${promptLength}).`,
        "max_tokens",
      );
    }
    const minTokens = request.minTokens ?? 0;
    if (!Number.isInteger(minTokens) || minTokens < 0) {
      throw new EngineRequestError("min_tokens must be a non-negative integer.", "min_tokens");
    }
    if (minTokens > maxTokens) {
      throw new EngineRequestError(
        `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`,
        "min_tokens",
      );
    }
    const priority = request.priority ?? 0;
    if (!Number.isFinite(priority)) throw new EngineRequestError("priority must be a finite number.", "priority");
    if (request.outputTokens !== undefined && (!Number.isInteger(request.outputTokens) || request.outputTokens < 1)) {
      throw new EngineRequestError("outputTokens must be a positive integer.", "outputTokens");
    }
    if (request.retentionTag !== undefined && request.retentionTag.length === 0) {
      throw new EngineRequestError("the retention tag must not be empty.", "retentionTag");
    }

    const fullBlocks = Math.floor(promptLength / this.blockSize);
    const given = request.promptBlockHashes;
    if (given !== undefined && given.length !== fullBlocks) {
      throw new EngineRequestError(`promptBlockHashes must hold ${fullBlocks} hashes, got ${given.length}`);
    }
    const blockHashes = given !== undefined ? given.slice() : promptBlockHashes(promptTokens, this.blockSize);
    const seed = promptSeed(promptTokens, this.blockSize, blockHashes);
    const natural = Math.max(request.outputTokens ?? naturalOutputTokens(seed), minTokens, 1);
    const stopsOnLength = request.ignoreEos === true || natural > maxTokens;
    const targetOutput = stopsOnLength ? maxTokens : natural;

    const seq = new Sequence({
      id,
      priority,
      arrivalMs: nowMs,
      order: this.submitted++,
      promptTokens,
      blockHashes,
      seed,
      targetOutput,
      finishReason: stopsOnLength ? "length" : "stop",
    });
    if (request.retentionTag !== undefined) {
      seq.retention = this.retention.open(request.retentionTag);
      this.kv.findCachedPrefix(blockHashes, blockHashes.length, this.hitBlocks);
      this.retention.claim(seq.retention, this.hitBlocks);
    }
    if (request.remoteKv !== undefined) {
      seq.remoteKv = { reported: request.remoteKv.reported === true, phase: "room", startMs: 0, landsAtMs: 0, tokens: 0, arrivedTokens: undefined, roomWaitMs: 0, kvWaitMs: 0 };
    }
    this.requests.set(id, seq);
    this.waiting.push(seq);
    this.waitingCount++;
    return {
      id,
      promptTokens: promptLength,
      maxTokens,
      completionTokens: targetOutput,
      finishReason: seq.finishReason,
      seed,
    };
  }

  /**
   * A program's word on one of its contexts (issue 13; the protocol's KvRetentionHint
   * without its tag), in this engine's ms clock: keep ranks the context's unreferenced
   * blocks after every ordinary one until `keep_ms` from now, drop before every other
   * (even just used), normal by recency again. A block several contexts share is kept
   * if any keeps it, dropped only if all drop it. True when the engine holds blocks or
   * requests of that context.
   */
  setRetention(tag: string, signal: RetentionSignal, nowMs: number): boolean {
    this.clockMs = Math.max(this.clockMs, nowMs);
    this.retention.expire(nowMs);
    const onGpu = this.retention.apply(tag, signal, nowMs);
    const onHost = this.hostTier?.setRetention(tag, signal, nowMs) ?? false;
    const applied = onGpu || onHost;
    if (applied) this.counters[`${signal.action}sApplied`]++;
    return applied;
  }

  /** A cached block leaves the GPU: write-back, unless its context was dropped, gives the host tier a copy. */
  private evicting(block: number, hash: number): void {
    const host = this.hostTier;
    const rank = this.kv.rankOfBlock(block);
    if (rank === EvictionRank.dropped) this.counters.evictedDroppedBlocks++;
    else if (rank === EvictionRank.ordinary) this.counters.evictedOrdinaryBlocks++;
    else this.counters.evictedKeptBlocks++;
    if (host !== undefined && host.writePolicy === "write-back" && rank !== EvictionRank.dropped) this.storeOnHost(host, block, hash);
    this.retention.detach(block);
  }

  private storeOnHost(host: HostKvTier, block: number, hash: number): void {
    if (host.store(hash, this.retention.contextsOf(block), this.clockMs)) this.counters.hostStoreBytes += host.bytesPerBlock;
  }

  /** Leading tokens of `promptTokens` the GPU prefix cache holds now, in whole blocks (an inspection: nothing is referenced). */
  cachedPrefixTokens(promptTokens: readonly string[]): number {
    const hashes = promptBlockHashes(promptTokens, this.blockSize);
    return this.kv.findCachedPrefix(hashes, hashes.length, []) * this.blockSize;
  }

  /**
   * Pins the cached blocks of a prefix so no allocation evicts them (issue 13: a prefill
   * engine holding a disaggregated call's KV until a decode engine reads it, as vLLM's
   * KV connector delays the free). Returns the blocks pinned, the longest cached run of
   * `blockHashes`; give them back with releaseHeld.
   */
  holdCachedPrefix(blockHashes: readonly number[]): number[] {
    const blocks: number[] = [];
    this.kv.findCachedPrefix(blockHashes, blockHashes.length, blocks);
    this.kv.reference(blocks);
    return blocks;
  }

  /** Unpins blocks holdCachedPrefix returned (once). */
  releaseHeld(blocks: readonly number[]): void {
    this.kv.release(blocks);
  }

  /**
   * Pulls started since the last call (each once): a reported pull's caller starts its
   * read now; anyone may time the pull's end.
   */
  takeKvPulls(): KvPull[] {
    const pulls = this.startedPulls;
    this.startedPulls = [];
    return pulls;
  }

  /**
   * A reported pull ended (EngineRequest.remoteKv.reported): the prompt's first `tokens`
   * tokens of KV arrived valid (0: none, the KV was gone; vLLM's recompute policy then
   * computes the rest here). False when no pull of that request waits for its report.
   */
  kvPullDone(id: string, tokens: number, nowMs: number): boolean {
    this.clockMs = Math.max(this.clockMs, nowMs);
    const pull = this.requests.get(id)?.remoteKv;
    if (pull === undefined || !pull.reported || pull.phase !== "pulling" || pull.arrivedTokens !== undefined) return false;
    if (!(tokens >= 0)) throw new RangeError("tokens must be >= 0");
    pull.arrivedTokens = tokens;
    return true;
  }

  /**
   * When a step could run although startStep found nothing to run: the earliest end of a
   * pull in progress (a reported one once reported); undefined when none is due.
   */
  nextWakeMs(): number | undefined {
    let wake: number | undefined;
    for (const seq of this.pulling) {
      const pull = seq.remoteKv as RemoteKvPull;
      if (pull.reported && pull.arrivedTokens === undefined) continue;
      if (wake === undefined || pull.landsAtMs < wake) wake = pull.landsAtMs;
    }
    return wake;
  }

  /** Drops a request (client disconnected) and frees its KV blocks. False if unknown or done. */
  abort(id: string): boolean {
    const seq = this.requests.get(id);
    if (!seq) return false;
    this.requests.delete(id);
    if (seq.state === SequenceState.waiting) {
      this.waitingCount--;
    } else if (seq.state === SequenceState.pullingKv) {
      this.waitingCount--;
      const list = seq.remoteKv?.phase === "landed" ? this.landed : this.pulling;
      list.splice(list.indexOf(seq), 1);
      this.releaseBlocks(seq);
    } else if (seq.state === SequenceState.running) {
      const index = this.running.indexOf(seq);
      if (index >= 0) this.running.splice(index, 1);
      this.releaseBlocks(seq);
    }
    this.retention.leave(seq.retention);
    seq.state = SequenceState.aborted;
    this.counters.aborted++;
    return true;
  }

  has(id: string): boolean {
    return this.requests.has(id);
  }

  get isStepActive(): boolean {
    return this.stepActive;
  }

  /** True when nothing is running or waiting. */
  get isIdle(): boolean {
    return this.running.length === 0 && this.waitingCount === 0;
  }

  /**
   * Schedules the next step at `nowMs` and returns its duration in ms, or undefined
   * when there is nothing to run. Call finishStep() when the duration has elapsed.
   */
  startStep(nowMs: number): number | undefined {
    if (this.stepActive) throw new Error("startStep called while a step is in progress");
    this.stepStartMs = nowMs;
    this.clockMs = Math.max(this.clockMs, nowMs);
    this.retention.expire(nowMs);
    this.hostTier?.expire(nowMs);
    this.stepLoadTokens = 0;
    if (this.pulling.length > 0) this.landPulls(nowMs);
    // A step that only preempted admits no waiting request (vLLM); retry once so
    // the freed blocks are used instead of reporting a false idle.
    if (!this.schedule() && this.scheduled.length === 0) this.schedule();
    if (this.scheduled.length === 0) return undefined;

    const shape = this.shape;
    shape.reset();
    for (const seq of this.scheduled) {
      const ahead = seq.numComputed;
      const n = seq.scheduledTokens;
      const isDecode = n === 1 && seq.outputCount > 0 && ahead === seq.numTokens - 1;
      if (isDecode) shape.addDecode(ahead + 1);
      else {
        shape.addPrefill(ahead, n);
        seq.prefillTokens += n;
      }
    }
    // A reload from the host tier holds the step (see host-kv-tier.ts).
    const duration = stepDurationMs(this.profile, shape) + (this.stepLoadTokens > 0 && this.hostTier ? this.hostTier.loadMs(this.stepLoadTokens) : 0);
    this.stepActive = true;
    this.stepEndMs = nowMs + duration;
    this.counters.steps++;
    this.counters.busyMs += duration;
    return duration;
  }

  /**
   * Applies the step started last: computed tokens advance, sequences that reached
   * the end of their (re)prefill emit a token, finished ones free their blocks.
   */
  finishStep(onToken?: TokenListener): EngineEvent[] {
    if (!this.stepActive) throw new Error("finishStep called without a step in progress");
    this.stepActive = false;
    const at = this.stepEndMs;
    const events = this.pendingEvents;
    this.pendingEvents = [];
    let finishedAny = false;
    for (const seq of this.scheduled) {
      if (seq.state !== SequenceState.running) continue; // aborted during the step
      seq.numComputed += seq.scheduledTokens;
      seq.scheduledTokens = 0;
      if (seq.numComputed < seq.numTokens) continue; // mid-prefill chunk
      const index = seq.outputCount++;
      this.counters.generationTokens++;
      if (index === 0) {
        seq.firstTokenMs = at;
        events.push({ type: "first_token", requestId: seq.id, atMs: at });
      }
      if (onToken) onToken(seq.id, index);
      if (seq.outputCount >= seq.targetOutput) {
        this.finish(seq, at, events);
        finishedAny = true;
      }
    }
    this.scheduled.length = 0;
    if (finishedAny) this.compactRunning();
    return events;
  }

  stats(): EngineStats {
    return {
      running: this.running.length,
      waiting: this.waitingCount,
      kvUsage: this.kv.usage,
      kvBlocksFree: this.kv.numFree,
      cachedBlocks: this.kv.numCachedBlocks,
      ...this.counters,
    };
  }

  get numRunning(): number {
    return this.running.length;
  }

  get numWaiting(): number {
    return this.waitingCount;
  }

  get kvUsage(): number {
    return this.kv.usage;
  }

  /** vLLM V1's schedule(): running requests first, then waiting ones. False if it preempted. */
  private schedule(): boolean {
    const bs = this.blockSize;
    const running = this.running;
    const scheduled = this.scheduled;
    let budget = this.maxBatchedTokens;
    let preempted = false;

    let i = 0;
    while (i < running.length && budget > 0) {
      const seq = running[i] as Sequence;
      const n = Math.min(seq.numTokens - seq.numComputed, budget);
      if (n <= 0) {
        i++;
        continue;
      }
      let canRun = true;
      while (this.blocksNeeded(seq, seq.numComputed + n) > this.kv.numFree) {
        const victim = this.pickVictim();
        const at = running.indexOf(victim);
        running.splice(at, 1);
        if (victim.scheduledTokens > 0) {
          budget += victim.scheduledTokens;
          victim.scheduledTokens = 0;
          scheduled.splice(scheduled.indexOf(victim), 1);
        }
        if (at < i) i--;
        this.preempt(victim);
        preempted = true;
        if (victim === seq) {
          canRun = false;
          break;
        }
      }
      if (!canRun) break;
      this.allocate(seq, n);
      seq.scheduledTokens = n;
      scheduled.push(seq);
      budget -= n;
      i++;
    }

    // vLLM admits no new request in a step that had to preempt.
    if (preempted) return false;
    // Requests whose pulled KV is in go first: they hold their blocks already, and a queue
    // head waiting for blocks they hold would wait forever (vLLM puts them back at the
    // queue's head each step, but a request preempted since goes before them there).
    const landed = this.landed;
    let admitted = 0;
    while (admitted < landed.length && budget > 0 && running.length < this.maxNumSeqs) {
      const seq = landed[admitted] as Sequence;
      // Compute what is left: normally the prompt's last token.
      const n = Math.min(seq.numTokens - seq.numComputed, budget);
      if (this.blocksNeeded(seq, seq.numComputed + n) > this.kv.numFree) break;
      admitted++;
      this.waitingCount--;
      if (this.nodeLedger !== undefined) this.countRecomputed(seq, Math.ceil(seq.numComputed / bs));
      this.startRunning(seq, n);
      budget -= n;
    }
    if (admitted > 0) landed.splice(0, admitted);
    const hits = this.hitBlocks;
    while (budget > 0 && running.length < this.maxNumSeqs) {
      const seq = this.waiting.peek();
      if (seq === undefined) break;
      if (seq.remoteKv !== undefined && seq.remoteKv.phase !== "landed") {
        // Its KV comes from elsewhere: blocks for the whole prompt first, no compute (vLLM: load_kv_async).
        if (!this.startPull(seq)) break;
        continue;
      }
      // At least one token must be computed to produce logits, so a fully cached
      // sequence still recomputes its last block.
      const maxHitBlocks = Math.floor((seq.numTokens - 1) / bs);
      seq.ensureBlockHashes(maxHitBlocks, bs);
      const hitCount = this.kv.findCachedPrefix(seq.blockHashes, maxHitBlocks, hits);
      // The GPU's cached prefix, continued by what the node's host tier holds.
      const loaded = this.hostTier !== undefined && hitCount < maxHitBlocks ? this.hostTier.lookup(seq.blockHashes, hitCount, maxHitBlocks) : 0;
      const computed = (hitCount + loaded) * bs;
      const n = Math.min(seq.numTokens - computed, budget);
      const fresh = Math.ceil((computed + n) / bs) - hitCount;
      if (fresh + this.kv.countUnreferenced(hits) > this.kv.numFree) break;

      this.waiting.pop();
      this.waitingCount--;
      this.counters.prefixCacheQueries += seq.numTokens;
      this.counters.prefixCacheHits += hitCount * bs;
      if (loaded > 0) {
        this.counters.hostHitTokens += loaded * bs;
        this.counters.hostLoadBytes += loaded * (this.hostTier?.bytesPerBlock ?? 0);
        this.stepLoadTokens += loaded * bs;
      }
      if (this.nodeLedger !== undefined) this.countRecomputed(seq, hitCount + loaded);
      this.kv.reference(hits);
      for (const b of hits) seq.blocks.push(b);
      seq.registeredBlocks = hitCount;
      seq.numComputed = computed;
      this.startRunning(seq, n);
      budget -= n;
    }
    return true;
  }

  /** An admitted sequence joins the batch with `n` tokens to compute; its first admission fixes what it found cached. */
  private startRunning(seq: Sequence, n: number): void {
    if (seq.cachedTokens < 0) {
      seq.cachedTokens = seq.numComputed;
      this.counters.promptTokens += seq.promptLength;
    }
    seq.state = SequenceState.running;
    this.running.push(seq);
    this.allocate(seq, n);
    seq.scheduledTokens = n;
    this.scheduled.push(seq);
  }

  /**
   * Allocates blocks for a remote-KV request's whole prompt (its own cached prefix,
   * referenced, and fresh blocks for the rest) and starts the pull; false when they do
   * not fit. Stays counted as waiting; takes no token budget.
   */
  private startPull(seq: Sequence): boolean {
    const bs = this.blockSize;
    const pull = seq.remoteKv as RemoteKvPull;
    const hits = this.hitBlocks;
    const maxHitBlocks = Math.floor((seq.numTokens - 1) / bs);
    seq.ensureBlockHashes(maxHitBlocks, bs);
    const hitCount = this.kv.findCachedPrefix(seq.blockHashes, maxHitBlocks, hits);
    const fresh = Math.ceil(seq.numTokens / bs) - hitCount;
    if (fresh + this.kv.countUnreferenced(hits) > this.kv.numFree) return false;
    this.waiting.pop();
    this.counters.prefixCacheQueries += seq.numTokens;
    this.counters.prefixCacheHits += hitCount * bs;
    this.kv.reference(hits);
    for (const b of hits) seq.blocks.push(b);
    // Registered when the KV is in (vLLM: delay_cache_blocks), so no other request reads them before.
    for (let k = 0; k < fresh; k++) seq.blocks.push(this.kv.allocate());
    seq.registeredBlocks = hitCount;
    seq.numComputed = hitCount * bs;
    const at = this.stepStartMs;
    pull.phase = "pulling";
    pull.startMs = at;
    pull.tokens = seq.numTokens - hitCount * bs;
    pull.landsAtMs = at + this.kvPullMs(pull.tokens);
    pull.roomWaitMs = at - seq.arrivalMs;
    seq.state = SequenceState.pullingKv;
    this.pulling.push(seq);
    this.startedPulls.push({ requestId: seq.id, tokens: pull.tokens, atMs: at, landsAtMs: pull.landsAtMs });
    this.counters.remoteKvPulls++;
    this.counters.remoteKvRoomWaitMs += pull.roomWaitMs;
    return true;
  }

  /** Pulls whose KV is in by `nowMs` make their requests schedulable (vLLM: _update_waiting_for_remote_kv). */
  private landPulls(nowMs: number): void {
    const pulling = this.pulling;
    let w = 0;
    for (let r = 0; r < pulling.length; r++) {
      const seq = pulling[r] as Sequence;
      const pull = seq.remoteKv as RemoteKvPull;
      if (pull.landsAtMs > nowMs || (pull.reported && pull.arrivedTokens === undefined)) pulling[w++] = seq;
      else this.land(seq, pull, nowMs);
    }
    pulling.length = w;
  }

  private land(seq: Sequence, pull: RemoteKvPull, nowMs: number): void {
    const bs = this.blockSize;
    const local = seq.numComputed;
    const arrived = pull.reported ? (pull.arrivedTokens ?? 0) : seq.numTokens;
    // What is valid, less the last token: computing it gives the logits (vLLM does the same).
    const computed = Math.min(Math.max(local, arrived), seq.numTokens - 1);
    const pulled = Math.max(0, computed - local);
    pull.phase = "landed";
    pull.kvWaitMs = nowMs - pull.startMs;
    pull.arrivedTokens = pulled;
    this.counters.remoteKvWaitMs += pull.kvWaitMs;
    this.counters.remoteKvPulledTokens += pulled;
    // Short: less than the prompt's whole blocks (a prefill engine holds no partial block to send).
    if (computed < Math.min(seq.numTokens - 1, Math.floor(seq.numTokens / bs) * bs)) this.counters.remoteKvShortPulls++;
    seq.numComputed = computed;
    if (computed === 0) {
      // Nothing arrived: free the blocks; it queues as any request and is computed here (its cache may serve some).
      this.releaseBlocks(seq);
      seq.registeredBlocks = 0;
      seq.state = SequenceState.waiting;
      this.waiting.push(seq);
      return;
    }
    this.registerFullBlocks(seq, Math.floor(computed / bs));
    this.landed.push(seq);
  }

  /** Full prompt blocks past `from` that this admission computes although the node computed them before. */
  private countRecomputed(seq: Sequence, from: number): void {
    const ledger = this.nodeLedger;
    if (ledger === undefined) return;
    const full = Math.floor(seq.numTokens / this.blockSize);
    seq.ensureBlockHashes(full, this.blockSize);
    for (let k = from; k < full; k++) if (ledger.has(seq.blockHashes[k] as number)) this.counters.recomputedTokens += this.blockSize;
  }

  /** New blocks `seq` needs to hold `tokens` tokens. */
  private blocksNeeded(seq: Sequence, tokens: number): number {
    return Math.max(0, Math.ceil(tokens / this.blockSize) - seq.blocks.length);
  }

  /** Allocates blocks for `n` more tokens and registers the blocks they fill. */
  private allocate(seq: Sequence, n: number): void {
    const bs = this.blockSize;
    const total = seq.numComputed + n;
    for (let need = this.blocksNeeded(seq, total); need > 0; need--) seq.blocks.push(this.kv.allocate());
    this.registerFullBlocks(seq, Math.floor(total / bs));
  }

  /** Registers the blocks `seq` has filled up to `full` as cached prefix blocks (and in the node's ledger). */
  private registerFullBlocks(seq: Sequence, full: number): void {
    if (full <= seq.registeredBlocks) return;
    seq.ensureBlockHashes(full, this.blockSize);
    const ledger = this.nodeLedger;
    for (let k = seq.registeredBlocks; k < full; k++) {
      this.kv.register(seq.blocks[k] as number, seq.blockHashes[k] as number);
      ledger?.record(seq.blockHashes[k] as number);
    }
    seq.registeredBlocks = full;
  }

  /** Priority policy: the lowest-priority, latest request; FCFS: the last admitted. */
  private pickVictim(): Sequence {
    const running = this.running;
    let victim = running[running.length - 1] as Sequence;
    if (!this.priorityScheduling) return victim;
    for (const s of running) {
      if (
        s.priority > victim.priority ||
        (s.priority === victim.priority &&
          (s.arrivalMs > victim.arrivalMs || (s.arrivalMs === victim.arrivalMs && s.order > victim.order)))
      ) {
        victim = s;
      }
    }
    return victim;
  }

  /** Preemption by recompute: free everything, requeue; it re-prefills, often from its own cached prefix. */
  private preempt(seq: Sequence): void {
    this.releaseBlocks(seq);
    seq.registeredBlocks = 0;
    seq.numComputed = 0;
    seq.state = SequenceState.waiting;
    seq.preemptions++;
    this.counters.preemptions++;
    this.waiting.push(seq);
    this.waitingCount++;
    this.pendingEvents.push({ type: "preempted", requestId: seq.id, atMs: this.stepStartMs });
  }

  private finish(seq: Sequence, at: number, events: EngineEvent[]): void {
    seq.state = SequenceState.finished;
    const pull = seq.remoteKv;
    if (pull !== undefined) this.counters.remoteKvRecomputedTokens += Math.max(0, seq.prefillTokens - 1);
    this.releaseBlocks(seq);
    this.retention.leave(seq.retention);
    this.requests.delete(seq.id);
    this.counters.finished++;
    const completion = seq.outputCount;
    events.push({
      type: "finished",
      requestId: seq.id,
      atMs: at,
      finishReason: seq.finishReason,
      usage: { promptTokens: seq.promptLength, cachedTokens: Math.max(0, seq.cachedTokens), completionTokens: completion },
      timing: {
        arrivalMs: seq.arrivalMs,
        firstTokenMs: seq.firstTokenMs,
        finishedMs: at,
        ttftMs: seq.firstTokenMs - seq.arrivalMs,
        tpotMs: completion > 1 ? (at - seq.firstTokenMs) / (completion - 1) : undefined,
        e2eMs: at - seq.arrivalMs,
      },
      preemptions: seq.preemptions,
      prefillTokens: seq.prefillTokens,
      ...(pull === undefined ? {} : { remoteKv: { pulledTokens: pull.arrivedTokens ?? 0, roomWaitMs: pull.roomWaitMs, kvWaitMs: pull.kvWaitMs } }),
    });
  }

  /** Frees a sequence's blocks, ranked by its context first; write-through copies its computed ones to the host tier. */
  private releaseBlocks(seq: Sequence): void {
    this.retention.releasing(seq.retention, seq.blocks);
    const host = this.hostTier;
    if (host !== undefined && host.writePolicy === "write-through") {
      for (let k = 0; k < seq.registeredBlocks; k++) {
        const block = seq.blocks[k] as number;
        // Blocks of a dropped context are not written.
        if (this.kv.isCached(block) && this.kv.rankOfBlock(block) !== EvictionRank.dropped) this.storeOnHost(host, block, this.kv.hashOfBlock(block));
      }
    }
    this.kv.release(seq.blocks);
    seq.blocks.length = 0;
  }

  /** Drops finished sequences from the running list in place, keeping admission order. */
  private compactRunning(): void {
    const running = this.running;
    let w = 0;
    for (let r = 0; r < running.length; r++) {
      const s = running[r] as Sequence;
      if (s.state === SequenceState.running) running[w++] = s;
    }
    running.length = w;
  }
}
