import type { KvRetentionHint } from "../protocol/kv-retention.js";
import { EventQueue } from "./des/event-queue.js";
import { EvictionRank, type KvBlockPool } from "./kv-cache.js";

/*
 * Branch-aware retention (issue 13) over one KvBlockPool: which contexts (retention
 * tags) each cached block belongs to, what the program said about each context (keep
 * through a tool wait, ordinary, drop), and so the block's eviction rank. A block is
 * kept while any tag on it is kept or has a request waiting or running in the engine
 * (a queued call is about to read its context: evicting it first, as a context that
 * is the only unkept one would be, costs a recompute at once), dropped only when every
 * tag on it is dropped and no untagged request used it, ordinary otherwise.
 *
 * Among kept blocks, who goes first (KeptOrder): by default the block whose contexts are
 * expected back furthest away (Belady's choice on the predictions: the latest keep end
 * of its kept contexts; a block shared by several is needed at the soonest of them),
 * and blocks with a request in the engine last of all (they are read now). The older
 * order, "latest-kept", evicts the context kept last first (a proxy for "back last" when
 * all tool waits are alike) and is kept for the benchmark's comparison.
 *
 * A hint costs O(blocks of its context × tags on each); a block operation O(1), or
 * O(log kept keys) for a kept block (kv-cache.ts), and O(tags on the block) when it is
 * evicted. No clock: keeps expire when the owner calls expire(now).
 */

const NO_CONTEXTS: readonly RetainedContext[] = Object.freeze([]);

/** How kept blocks are ordered among themselves for eviction (see the header). */
export type KeptOrder = "furthest-return" | "latest-kept";

/** The kept key of a block a live request's context holds: below every keep's, so evicted last. */
const LIVE_KEY = Number.NEGATIVE_INFINITY;

/** A hint without its tag: what EngineModel.setRetention takes. */
export type RetentionSignal =
  | { action: "keep"; keep_ms: number }
  | { action: "normal" }
  | { action: "drop" };

/** One context the pool holds blocks or requests of. */
export interface RetainedContext {
  readonly tag: string;
  action: KvRetentionHint["action"];
  /** When a keep ends (the owner's ms clock); meaningful while action is keep. */
  keepUntilMs: number;
  /** Its kept blocks' eviction key (higher goes first); meaningful while action is keep. */
  keptKey: number;
  readonly blocks: Set<number>;
  /** Requests with this tag in the engine (their blocks join at release). */
  liveRequests: number;
}

export class KvRetentionIndex {
  private readonly contexts = new Map<string, RetainedContext>();
  private readonly tagsOfBlock: (RetainedContext[] | undefined)[];
  private readonly keptTags: Int32Array;
  /** Contexts on the block with a live request. */
  private readonly liveTags: Int32Array;
  private readonly droppedTags: Int32Array;
  /** A request without a tag used the block: some context nobody ranked needs it. */
  private readonly untaggedUse: Uint8Array;
  private readonly keepEnds = new EventQueue<RetainedContext>();
  /** Keeps begun so far: the latest-kept order's key. */
  private keepsBegun = 0;

  constructor(
    private readonly pool: KvBlockPool,
    readonly keptOrder: KeptOrder = "furthest-return",
  ) {
    this.tagsOfBlock = new Array<RetainedContext[] | undefined>(pool.numBlocks);
    this.keptTags = new Int32Array(pool.numBlocks);
    this.liveTags = new Int32Array(pool.numBlocks);
    this.droppedTags = new Int32Array(pool.numBlocks);
    this.untaggedUse = new Uint8Array(pool.numBlocks);
  }

  /** Contexts known (with blocks or live requests). */
  get size(): number {
    return this.contexts.size;
  }

  context(tag: string): RetainedContext | undefined {
    return this.contexts.get(tag);
  }

  /** The tags on a block. */
  tagsOf(block: number): readonly string[] {
    return this.contextsOf(block).map((c) => c.tag);
  }

  /** The contexts a block belongs to, for a copy that leaves with it (the host tier). */
  contextsOf(block: number): readonly RetainedContext[] {
    return this.tagsOfBlock[block] ?? NO_CONTEXTS;
  }

  /** A request with `tag` entered the engine. */
  open(tag: string): RetainedContext {
    const context = this.contextFor(tag);
    context.liveRequests++;
    if (context.liveRequests === 1) this.liveChanged(context, 1);
    return context;
  }

  /**
   * A request is about to release `blocks` (finished, preempted, aborted): its cached
   * blocks join its context, or, untagged, are marked as used by a context nobody
   * ranks, so each is ranked before it enters the free queue.
   */
  releasing(context: RetainedContext | undefined, blocks: readonly number[]): void {
    if (context === undefined) {
      for (const b of blocks) this.markUntagged(b);
      return;
    }
    for (const b of blocks) if (this.pool.isCached(b)) this.attach(context, b);
  }

  /** A request with this context left the engine for good. */
  leave(context: RetainedContext | undefined): void {
    if (context === undefined) return;
    context.liveRequests--;
    if (context.liveRequests === 0) this.liveChanged(context, -1);
    this.forgetIfEmpty(context);
  }

  private liveChanged(context: RetainedContext, delta: 1 | -1): void {
    if (context.blocks.size === 0) return;
    const live = this.liveTags;
    // Into the back of a queue, tail-first, as a release does. A context a queued call is about to read goes
    // behind every kept one (LIVE_KEY): evicting it first, as the kept-last-first order once did, is a
    // recompute at once (bench:evolve: 0.30 M blocks evicted that way, 99 % read again).
    const blocks = [...context.blocks].reverse();
    for (const b of blocks) {
      live[b] = (live[b] ?? 0) + delta;
      this.rerank(b);
    }
  }

  /**
   * A waiting request of `context` will read these cached blocks (its prefix): they join
   * its context now, so a drop of an older context sharing them (the generation it
   * replaces) does not evict them before the request is admitted.
   */
  claim(context: RetainedContext, blocks: readonly number[]): void {
    for (const b of blocks) if (this.pool.isCached(b)) this.attach(context, b);
  }

  /**
   * Tags cached blocks that arrived without a request (a host tier's copy):
   * O(blocks given). The context's other blocks stay where they are (opening it as a
   * request would move every one of them twice, O(context) per block stored).
   */
  tag(tag: string, blocks: readonly number[]): RetainedContext | undefined {
    const context = this.contextFor(tag);
    for (const b of blocks) if (this.pool.isCached(b)) this.attach(context, b);
    this.forgetIfEmpty(context);
    return this.contexts.get(tag);
  }

  /**
   * A program's word on a context; true when the pool holds blocks or requests of it
   * (a hint on a context it does not hold changes nothing).
   */
  apply(tag: string, signal: RetentionSignal, nowMs: number): boolean {
    const context = this.contexts.get(tag);
    if (context === undefined) return false;
    if (signal.action === "keep") {
      const renewed = context.action === "keep";
      context.keepUntilMs = nowMs + signal.keep_ms;
      this.keepEnds.push(context.keepUntilMs, context);
      if (this.keptOrder === "furthest-return") context.keptKey = context.keepUntilMs;
      else if (!renewed) context.keptKey = ++this.keepsBegun;
      // A renewal moved the return: its blocks move to their new place among the kept.
      if (renewed && this.keptOrder === "furthest-return") for (const b of [...context.blocks].reverse()) this.rerank(b);
    }
    this.transition(context, signal.action);
    return true;
  }

  /** Ends every keep due by `nowMs`: those contexts rank by recency again. */
  expire(nowMs: number): void {
    const ends = this.keepEnds;
    for (let next = ends.peek(); next !== undefined && next.time <= nowMs; next = ends.peek()) {
      ends.pop();
      const context = next.event;
      // A later keep moved the end, or the context is gone: a stale entry.
      if (context.action !== "keep" || context.keepUntilMs !== next.time || this.contexts.get(context.tag) !== context) continue;
      this.transition(context, "normal");
    }
  }

  /** The block is being evicted: it leaves every context it was in. */
  detach(block: number): void {
    this.untaggedUse[block] = 0;
    const tags = this.tagsOfBlock[block];
    if (tags === undefined) return;
    this.tagsOfBlock[block] = undefined;
    this.keptTags[block] = 0;
    this.liveTags[block] = 0;
    this.droppedTags[block] = 0;
    for (const context of tags) {
      context.blocks.delete(block);
      this.forgetIfEmpty(context);
    }
  }

  private contextFor(tag: string): RetainedContext {
    let context = this.contexts.get(tag);
    if (context === undefined) {
      context = { tag, action: "normal", keepUntilMs: 0, keptKey: 0, blocks: new Set(), liveRequests: 0 };
      this.contexts.set(tag, context);
    }
    return context;
  }

  private attach(context: RetainedContext, block: number): void {
    if (context.blocks.has(block)) return;
    context.blocks.add(block);
    let tags = this.tagsOfBlock[block];
    if (tags === undefined) {
      tags = [];
      this.tagsOfBlock[block] = tags;
    }
    tags.push(context);
    if (context.action === "keep") this.keptTags[block] = (this.keptTags[block] ?? 0) + 1;
    if (context.liveRequests > 0) this.liveTags[block] = (this.liveTags[block] ?? 0) + 1;
    if (context.action === "drop") this.droppedTags[block] = (this.droppedTags[block] ?? 0) + 1;
    this.rerank(block);
  }

  private markUntagged(block: number): void {
    if (this.untaggedUse[block] === 1) return;
    this.untaggedUse[block] = 1;
    if (this.pool.isCached(block)) this.rerank(block);
  }

  private transition(context: RetainedContext, action: RetainedContext["action"]): void {
    const from = context.action;
    if (from === action) return;
    context.action = action;
    const kept = this.keptTags;
    const dropped = this.droppedTags;
    // A context loses its last blocks before its prefix: into the back of its queue (or kept list),
    // tail-first, as a release does. A keep that ends counts as a use, so its blocks rank as the most recent
    // ordinary ones (a tool a little past its prediction still finds them).
    const blocks = [...context.blocks].reverse();
    for (const b of blocks) {
      if (from === "keep") kept[b] = (kept[b] ?? 0) - 1;
      if (from === "drop") dropped[b] = (dropped[b] ?? 0) - 1;
      if (action === "keep") kept[b] = (kept[b] ?? 0) + 1;
      if (action === "drop") dropped[b] = (dropped[b] ?? 0) + 1;
      this.rerank(b);
    }
  }

  /** Puts the block where its tags rank it (and, kept, where its key orders it among the kept). */
  private rerank(block: number): void {
    const rank = this.rankFor(block);
    this.pool.setRank(block, rank, rank === EvictionRank.kept ? this.keptKeyFor(block) : 0);
  }

  private rankFor(block: number): EvictionRank {
    if ((this.keptTags[block] ?? 0) > 0 || (this.liveTags[block] ?? 0) > 0) return EvictionRank.kept;
    const tags = this.tagsOfBlock[block]?.length ?? 0;
    if (tags > 0 && this.droppedTags[block] === tags && this.untaggedUse[block] === 0) return EvictionRank.dropped;
    return EvictionRank.ordinary;
  }

  /** A kept block's key: LIVE_KEY when a request in the engine holds one of its contexts, else its kept contexts' lowest key. */
  private keptKeyFor(block: number): number {
    if ((this.liveTags[block] ?? 0) > 0) return LIVE_KEY;
    let key = Number.POSITIVE_INFINITY;
    for (const context of this.tagsOfBlock[block] ?? NO_CONTEXTS) if (context.action === "keep" && context.keptKey < key) key = context.keptKey;
    return key;
  }

  private forgetIfEmpty(context: RetainedContext): void {
    if (context.blocks.size === 0 && context.liveRequests === 0) this.contexts.delete(context.tag);
  }
}
