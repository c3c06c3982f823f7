/*
 * The KV cache as vLLM V1's block pool manages it: fixed-size blocks with reference
 * counts, a free queue in LRU order, and a prefix cache mapping a full block's
 * chained hash to the block that holds it. A freed block keeps its hash and stays
 * reusable until it is evicted, i.e. taken from the head of the free queue for a new
 * allocation. Arrays and index-linked lists keep every operation O(1) and
 * allocation-free.
 *
 * Branch-aware retention (issue 13) splits the free queue in three by eviction rank:
 * blocks of contexts a program dropped go first, then ordinary blocks in LRU order,
 * then blocks of contexts a program keeps. Kept blocks are ordered among themselves by
 * a key, highest first (KvRetentionIndex: the kept context expected back last goes
 * first): one list per key, and an indexed max-heap of the non-empty lists, so an
 * eviction costs O(log keys), never a scan. Who ranks a block is the caller's business
 * (KvRetentionIndex); with no ranks set, every block is ordinary and this is vLLM's
 * single LRU queue.
 */

import { IndexedHeap } from "../core/indexed-heap.js";
import { BlockHashTable } from "./block-hash-table.js";

const NIL = -1;

/** Where an unreferenced block waits for eviction; lower goes first. */
export const EvictionRank = { dropped: 0, ordinary: 1, kept: 2 } as const;
export type EvictionRank = (typeof EvictionRank)[keyof typeof EvictionRank];
const RANKS = 3;

/** The kept blocks sharing one key, in the order they were freed (head evicted first). */
interface KeptList {
  readonly key: number;
  head: number;
  tail: number;
  heapIndex: number;
}

const KEPT_LIST_SLOT = {
  get: (list: KeptList) => list.heapIndex,
  set: (list: KeptList, index: number) => {
    list.heapIndex = index;
  },
};

/** Told of a cached block about to be evicted, while its hash and rank still stand. */
export type EvictionListener = (block: number, hash: number) => void;

export class KvBlockPool {
  readonly numBlocks: number;
  private readonly refCount: Int32Array;
  private readonly hashOf: Float64Array;
  private readonly hashed: Uint8Array;
  /** A block's eviction rank: the free queue it is in, or joins when released. */
  private readonly rankOf: Uint8Array;
  /** A kept block's key: the kept list it is in, or joins when released (highest evicted first). */
  private readonly keyOf: Float64Array;
  /** Free queues, doubly linked over block ids; a head is evicted first. Dropped and ordinary: one queue each (heads, tails); kept: one list per key. */
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly heads = new Int32Array(RANKS).fill(NIL);
  private readonly tails = new Int32Array(RANKS).fill(NIL);
  private readonly keptLists = new Map<number, KeptList>();
  private readonly keptHeap = new IndexedHeap<KeptList>((a, b) => a.key > b.key, KEPT_LIST_SLOT);
  private free = 0;
  private readonly cached: BlockHashTable;
  private evictionListener: EvictionListener | undefined;

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new RangeError("numBlocks must be a positive integer");
    this.numBlocks = numBlocks;
    this.refCount = new Int32Array(numBlocks);
    this.hashOf = new Float64Array(numBlocks);
    this.hashed = new Uint8Array(numBlocks);
    this.rankOf = new Uint8Array(numBlocks).fill(EvictionRank.ordinary);
    this.keyOf = new Float64Array(numBlocks);
    this.prev = new Int32Array(numBlocks);
    this.next = new Int32Array(numBlocks);
    this.cached = new BlockHashTable(numBlocks);
    for (let b = 0; b < numBlocks; b++) this.append(b);
  }

  /** Blocks not referenced by any request (cached ones included: they are evictable). */
  get numFree(): number {
    return this.free;
  }

  /** Fraction of blocks referenced by requests, like vLLM's kv_cache_usage_perc. */
  get usage(): number {
    return 1 - this.free / this.numBlocks;
  }

  /** One listener (the engine's retention index, host tier): set once, before use. */
  onEviction(listener: EvictionListener): void {
    this.evictionListener = listener;
  }

  /** Whether `block` holds a reusable prefix block (and so can carry a retention tag). */
  isCached(block: number): boolean {
    return this.hashed[block] === 1;
  }

  hashOfBlock(block: number): number {
    return this.hashOf[block] ?? Number.NaN;
  }

  rankOfBlock(block: number): EvictionRank {
    return (this.rankOf[block] ?? EvictionRank.ordinary) as EvictionRank;
  }

  /**
   * Re-ranks a block; `keptKey` orders kept blocks (highest evicted first; ignored for
   * other ranks). An unreferenced one moves to the back of its new queue (evicted last
   * of that rank and key); one whose rank and key stand stays where it is.
   */
  setRank(block: number, rank: EvictionRank, keptKey = 0): void {
    if (this.rankOf[block] === rank && (rank !== EvictionRank.kept || this.keyOf[block] === keptKey)) return;
    const free = this.refCount[block] === 0;
    if (free) this.unlink(block);
    this.rankOf[block] = rank;
    if (rank === EvictionRank.kept) this.keyOf[block] = keptKey;
    if (free) this.append(block);
  }

  keptKeyOfBlock(block: number): number {
    return this.keyOf[block] ?? 0;
  }

  /** The block holding `hash`, if it is cached. */
  blockOf(hash: number): number | undefined {
    return this.cached.get(hash);
  }

  refCountOf(block: number): number {
    return this.refCount[block] ?? 0;
  }

  /** The blocks of one rank's free queue, head (evicted next) first: O(n log n), for audits and tests. */
  freeQueue(rank: EvictionRank): number[] {
    const out: number[] = [];
    const heads = rank === EvictionRank.kept ? [...this.keptLists.values()].sort((a, b) => b.key - a.key).map((list) => list.head) : [this.heads[rank] as number];
    for (const head of heads) for (let b = head; b !== NIL && out.length <= this.numBlocks; b = this.next[b] as number) out.push(b);
    return out;
  }

  /** Blocks currently holding a reusable prefix (referenced or not). */
  get numCachedBlocks(): number {
    return this.cached.size;
  }

  /**
   * Longest run of cached blocks for `hashes[0..maxBlocks)`; their ids are written to
   * `out` (cleared first). Nothing is referenced yet: see `reference`.
   */
  findCachedPrefix(hashes: readonly number[], maxBlocks: number, out: number[]): number {
    out.length = 0;
    const limit = Math.min(maxBlocks, hashes.length);
    for (let k = 0; k < limit; k++) {
      const block = this.cached.get(hashes[k] ?? Number.NaN);
      if (block === undefined) break;
      out.push(block);
    }
    return out.length;
  }

  /** How many of `blocks` are unreferenced, i.e. would leave the free queue if used. */
  countUnreferenced(blocks: readonly number[]): number {
    let n = 0;
    for (const b of blocks) if (this.refCount[b] === 0) n++;
    return n;
  }

  /** Takes a reference on cache-hit blocks. */
  reference(blocks: readonly number[]): void {
    for (const b of blocks) {
      if (this.refCount[b] === 0) this.unlink(b);
      this.refCount[b] = (this.refCount[b] ?? 0) + 1;
    }
  }

  /** The block allocate() would take next (undefined: none free), or the next of one rank's queue; O(1). */
  nextVictim(rank?: EvictionRank): number | undefined {
    const { heads } = this;
    const kept = () => this.keptHeap.peek()?.head ?? NIL;
    let b: number;
    if (rank === undefined) {
      b = heads[EvictionRank.dropped] as number;
      if (b === NIL) b = heads[EvictionRank.ordinary] as number;
      if (b === NIL) b = kept();
    } else b = rank === EvictionRank.kept ? kept() : (heads[rank] as number);
    return b === NIL ? undefined : b;
  }

  /**
   * A fresh block, evicting the head of the lowest-ranked non-empty queue: a dropped
   * context's block, else the least recently freed ordinary one, else a kept one.
   */
  allocate(): number {
    const b = this.nextVictim() ?? NIL;
    if (b === NIL) throw new Error("KV cache exhausted: caller must check numFree first");
    if (this.hashed[b] === 1) {
      this.evictionListener?.(b, this.hashOf[b] ?? Number.NaN);
      this.cached.deleteIfMapsTo(this.hashOf[b] ?? Number.NaN, b);
      this.hashed[b] = 0;
    }
    // The listener may have re-ranked it (tags detached): unlink from wherever it is now.
    this.unlink(b);
    this.rankOf[b] = EvictionRank.ordinary;
    this.refCount[b] = 1;
    return b;
  }

  /** Makes a full block reusable under `hash`; a hash already cached keeps its block. */
  register(block: number, hash: number): void {
    if (this.hashed[block] === 1 || this.cached.has(hash)) return;
    this.hashed[block] = 1;
    this.hashOf[block] = hash;
    this.cached.set(hash, block);
  }

  /**
   * Drops one reference on each of a request's blocks. Freed blocks join the queue
   * tail-first, so a request's last blocks are evicted before its prefix (vLLM).
   */
  release(blocks: readonly number[]): void {
    for (let i = blocks.length - 1; i >= 0; i--) {
      const b = blocks[i] ?? NIL;
      const count = (this.refCount[b] ?? 0) - 1;
      if (count < 0) throw new Error(`KV block ${b} released more often than referenced`);
      this.refCount[b] = count;
      if (count === 0) this.append(b);
    }
  }

  private append(b: number): void {
    const rank = this.rankOf[b] as number;
    this.free++;
    this.next[b] = NIL;
    if (rank === EvictionRank.kept) {
      const key = this.keyOf[b] ?? 0;
      let list = this.keptLists.get(key);
      if (list === undefined) {
        list = { key, head: NIL, tail: NIL, heapIndex: -1 };
        this.keptLists.set(key, list);
        this.keptHeap.push(list);
      }
      this.prev[b] = list.tail;
      if (list.tail === NIL) list.head = b;
      else this.next[list.tail] = b;
      list.tail = b;
      return;
    }
    const tail = this.tails[rank] as number;
    this.prev[b] = tail;
    if (tail === NIL) this.heads[rank] = b;
    else this.next[tail] = b;
    this.tails[rank] = b;
  }

  private unlink(b: number): void {
    const rank = this.rankOf[b] as number;
    const p = this.prev[b] ?? NIL;
    const n = this.next[b] ?? NIL;
    this.prev[b] = NIL;
    this.next[b] = NIL;
    this.free--;
    if (rank === EvictionRank.kept) {
      const list = this.keptLists.get(this.keyOf[b] ?? 0);
      if (list === undefined) throw new Error(`KV block ${b} is kept but in no kept list`);
      if (p === NIL) list.head = n;
      else this.next[p] = n;
      if (n === NIL) list.tail = p;
      else this.prev[n] = p;
      if (list.head === NIL) {
        this.keptLists.delete(list.key);
        this.keptHeap.remove(list);
      }
      return;
    }
    if (p === NIL) this.heads[rank] = n;
    else this.next[p] = n;
    if (n === NIL) this.tails[rank] = p;
    else this.prev[n] = p;
  }
}
