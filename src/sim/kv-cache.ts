/*
 * The KV cache as vLLM V1's block pool manages it: fixed-size blocks with reference
 * counts, a free queue in LRU order, and a prefix cache mapping a full block's
 * chained hash to the block that holds it. A freed block keeps its hash and stays
 * reusable until it is evicted, i.e. taken from the head of the free queue for a new
 * allocation. Arrays and an index-linked list keep every operation O(1) and
 * allocation-free.
 */

import { BlockHashTable } from "./block-hash-table.js";

const NIL = -1;

export class KvBlockPool {
  readonly numBlocks: number;
  private readonly refCount: Int32Array;
  private readonly hashOf: Float64Array;
  private readonly hashed: Uint8Array;
  /** Free queue: doubly linked over block ids; head is evicted first. */
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private head = NIL;
  private tail = NIL;
  private free = 0;
  private readonly cached: BlockHashTable;

  constructor(numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new RangeError("numBlocks must be a positive integer");
    this.numBlocks = numBlocks;
    this.refCount = new Int32Array(numBlocks);
    this.hashOf = new Float64Array(numBlocks);
    this.hashed = new Uint8Array(numBlocks);
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

  /**
   * KV copied in from elsewhere (a prefill engine's, or the host tier's): each hash not
   * cached yet gets a block of its own, registered and left unreferenced, so the next
   * request with that prefix finds it as a cache hit. Imports nothing unless every
   * missing block fits in the free queue (an import that evicted its own first blocks
   * would leave a gap no lookup passes). Returns the blocks added.
   */
  importCached(hashes: readonly number[]): number {
    const missing = hashes.filter((hash) => !this.cached.has(hash));
    if (missing.length > this.numFree) return 0;
    for (const hash of missing) {
      const b = this.allocate();
      this.register(b, hash);
      this.release([b]);
    }
    return missing.length;
  }

  /** A fresh block, evicting the least recently freed one (and its cache entry). */
  allocate(): number {
    const b = this.head;
    if (b === NIL) throw new Error("KV cache exhausted: caller must check numFree first");
    this.unlink(b);
    if (this.hashed[b] === 1) {
      this.cached.deleteIfMapsTo(this.hashOf[b] ?? Number.NaN, b);
      this.hashed[b] = 0;
    }
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
    this.prev[b] = this.tail;
    this.next[b] = NIL;
    if (this.tail === NIL) this.head = b;
    else this.next[this.tail] = b;
    this.tail = b;
    this.free++;
  }

  private unlink(b: number): void {
    const p = this.prev[b] ?? NIL;
    const n = this.next[b] ?? NIL;
    if (p === NIL) this.head = n;
    else this.next[p] = n;
    if (n === NIL) this.tail = p;
    else this.prev[n] = p;
    this.prev[b] = NIL;
    this.next[b] = NIL;
    this.free--;
  }
}
