import type { DecodeCostModel } from "../admission.js";
import type { RoleDemand } from "./roles.js";

/*
 * What a role controller is fed, measured the same way by the pool (real time) and
 * the simulator (virtual time): each call's prefill work from the engine's cost model
 * as it is sent to prefill, the work still waiting for a prefill engine, output tokens
 * at their context as decode work, the KV of calls handed to decode and not yet
 * decoding, and the latencies of the window. `read` closes a window. Pure: the caller
 * says what happened and when.
 *
 * A call's prefill work is priced when it is sent to a prefill engine, before anyone
 * knows what the engine will find cached: the pool (and the simulator, which does as
 * the pool) prices its whole prompt. With prefix caching working that is many times the
 * real cost; once prefill queues, contexts are evicted before their next call is served
 * and whole prompts are computed again. So each finished prefill's own report of what it
 * found cached prices the work it really did, and the estimates are scaled by the recent
 * ratio of the two (`prefillCostFactor`).
 */

/** The engine cost model the meter prices work with: the decode terms and prefill attention, plus the batch a full decode step holds. */
export interface RoleWorkModel extends DecodeCostModel {
  /** Sequences in a full decode batch (vLLM max_num_seqs): each output token's share of a step's weight-read floor. */
  batchSequences: number;
}

/** Engine-ms to prefill `tokens` tokens after a cached prefix of `prior`: the linear rate and the attention over the prefix and itself. */
export function prefillWorkMs(model: RoleWorkModel, tokens: number, prior: number): number {
  const fresh = Math.max(0, tokens);
  return fresh * model.perTokenMs + (model.attentionMsPerTokenPair ?? 0) * fresh * (Math.max(0, prior) + fresh / 2);
}

/** Engine-ms one output token costs at `context` tokens: its sequence and KV-read terms and its share of a full batch's floor. */
export function decodeTokenMs(model: RoleWorkModel, context: number): number {
  return model.perSequenceMs + Math.max(0, context) * model.perContextTokenMs + model.decodeBaseMs / Math.max(1, model.batchSequences);
}

/** What the meter cannot see for itself: the engines' state at the end of the window. */
export interface RoleEngineReadings {
  /** Context tokens decode engines hold now (their KV use × capacity, summed). */
  decodeKvTokens: number;
  /** Calls waiting at prefill engines (the pool's queue for them and the engines' own). */
  prefillQueue: number;
  /** Mean KV use of the decode engines, 0–1. */
  decodeKvUsage: number;
}

const percentile = (values: readonly number[], p: number): number | undefined => {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
};

/** Keys beyond this many in flight are not tracked (a leak in the caller would otherwise grow the meter without bound). */
const MAX_TRACKED = 100_000;

/** Weight each earlier window keeps in the prefill cost factor: its last few windows count, the newest most. */
const COST_MEMORY = 0.5;

/** What a finished prefill's engine reported: its prompt and the part found cached (usage.prompt_tokens_details.cached_tokens). */
export interface PrefillUsage {
  promptTokens: number;
  cachedTokens: number;
}

export class RoleDemandMeter {
  readonly #model: RoleWorkModel;
  readonly #prefilling = new Map<string, number>();
  readonly #toDecode = new Map<string, number>();
  #windowStartMs: number;
  #prefillWorkMs = 0;
  #decodeWorkMs = 0;
  #firstTokens: number[] = [];
  #interTokens: number[] = [];
  /** Finished prefills' work as estimated when sent, and as their engines' reports price it (decayed sums over recent windows). */
  #estimatedDoneMs = 0;
  #reportedDoneMs = 0;
  #costFactor = 1;

  constructor(model: RoleWorkModel, nowMs: number) {
    this.#model = model;
    this.#windowStartMs = nowMs;
  }

  /** A call sent to prefill: `freshTokens` to compute after `cachedTokens` found cached (the pool's estimate). */
  prefillQueued(callId: string, freshTokens: number, cachedTokens: number): void {
    const work = prefillWorkMs(this.#model, freshTokens, cachedTokens);
    this.#prefillWorkMs += work;
    if (this.#prefilling.size < MAX_TRACKED || this.#prefilling.has(callId)) this.#prefilling.set(callId, work);
  }

  /**
   * Its first token is out (or the prefill failed: `ttftMs` undefined); its prefill is
   * no longer backlog. `usage`, when the engine reported it, is what the prefill
   * really computed: it corrects the estimates of the calls still to come.
   */
  prefillDone(callId: string, ttftMs: number | undefined, usage?: PrefillUsage): void {
    const estimated = this.#prefilling.get(callId);
    this.#prefilling.delete(callId);
    if (ttftMs !== undefined && Number.isFinite(ttftMs)) this.#firstTokens.push(ttftMs);
    if (estimated === undefined || usage === undefined || !(usage.promptTokens > 0)) return;
    const cached = Math.min(Math.max(0, usage.cachedTokens), usage.promptTokens);
    this.#estimatedDoneMs += estimated;
    this.#reportedDoneMs += prefillWorkMs(this.#model, usage.promptTokens - cached, cached);
  }

  /** Prefill work done ÷ work estimated, over the finished prefills of the last few windows (1 until one is reported). */
  get prefillCostFactor(): number {
    return this.#costFactor;
  }

  /** Its prefill is done: its context waits for decode room, whether a decode engine took it or the pool holds it for lack of one. */
  decodeQueued(callId: string, contextTokens: number): void {
    if (this.#toDecode.size < MAX_TRACKED || this.#toDecode.has(callId)) this.#toDecode.set(callId, Math.max(0, contextTokens));
  }

  /** It decodes now (its KV is in the engine's use), or it ended before. */
  decodeStarted(callId: string): void {
    this.#toDecode.delete(callId);
  }

  /** `count` output tokens made at a mean context of `contextTokens`; `interTokenMs` their mean spacing when known. */
  decoded(count: number, contextTokens: number, interTokenMs?: number): void {
    if (!(count > 0)) return;
    this.#decodeWorkMs += count * decodeTokenMs(this.#model, contextTokens);
    if (interTokenMs !== undefined && Number.isFinite(interTokenMs)) this.#interTokens.push(interTokenMs);
  }

  /** A decode's mean inter-token spacing, where its tokens are counted by `decoded` apart from it (the simulator counts them per engine per round). */
  interToken(interTokenMs: number): void {
    if (Number.isFinite(interTokenMs)) this.#interTokens.push(interTokenMs);
  }

  /** A call that ended anywhere: nothing of it is backlog any more. */
  forget(callId: string): void {
    this.#prefilling.delete(callId);
    this.#toDecode.delete(callId);
  }

  /** The window since the last read, as the controller takes it; starts the next window. */
  read(nowMs: number, engines: RoleEngineReadings): RoleDemand {
    const seconds = Math.max(1, nowMs - this.#windowStartMs) / 1_000;
    if (this.#estimatedDoneMs > 0) this.#costFactor = this.#reportedDoneMs / this.#estimatedDoneMs;
    this.#estimatedDoneMs *= COST_MEMORY;
    this.#reportedDoneMs *= COST_MEMORY;
    const factor = this.#costFactor;
    let backlogMs = 0;
    for (const work of this.#prefilling.values()) backlogMs += work * factor;
    let waitingKv = 0;
    for (const tokens of this.#toDecode.values()) waitingKv += tokens;
    const demand: RoleDemand = {
      prefillWorkMsPerSec: (this.#prefillWorkMs * factor) / seconds,
      prefillBacklogMs: backlogMs,
      decodeWorkMsPerSec: this.#decodeWorkMs / seconds,
      decodeKvTokens: engines.decodeKvTokens + waitingKv,
      prefillQueue: engines.prefillQueue,
      decodeKvUsage: engines.decodeKvUsage,
      ttftP95Ms: percentile(this.#firstTokens, 0.95),
      itlMs: this.#interTokens.length === 0 ? undefined : this.#interTokens.reduce((a, b) => a + b, 0) / this.#interTokens.length,
    };
    this.#windowStartMs = nowMs;
    this.#prefillWorkMs = 0;
    this.#decodeWorkMs = 0;
    this.#firstTokens = [];
    this.#interTokens = [];
    return demand;
  }
}
