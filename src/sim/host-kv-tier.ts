import { KvBlockPool } from "./kv-cache.js";
import { KV_LINKS, type KvLinkProfile, kvTransferMs } from "./kv-links.js";
import { type KeptOrder, KvRetentionIndex, type RetainedContext, type RetentionSignal } from "./kv-retention-index.js";
import type { EngineProfileName } from "./profiles.js";

/*
 * The host-memory KV tier of one node (issue 13), shared by the node's engines: blocks a
 * GPU computes are copied here (write-through, the default: as a request releases them,
 * so a role switch or a move to another engine finds them while the first GPU still
 * holds them; or write-back: only as the GPU evicts them), and a later request whose
 * prefix its GPU lacks but the tier holds reloads those blocks over PCIe instead of
 * recomputing them, on whichever engine of the node it lands. vLLM's OffloadingConnector
 * (--kv-offloading-backend native, vllm/config/vllm.py) and SGLang's HiCache
 * (--enable-hierarchical-cache) do this per engine; LMCache's local CPU backend can be
 * shared. Eviction here is LRU (vLLM's vllm/v1/kv_offload/cpu/policies/lru.py) with the
 * same retention ranks as the GPU: dropped contexts first, kept ones last.
 *
 * Write-through is what the real tiers do: vLLM's OffloadingConnector stores each
 * request's blocks in order as they are computed (offloading/scheduler.py,
 * `_next_stored_block_idx`), SGLang's --hicache-write-policy defaults to write_through,
 * and LMCache saves KV as the forward pass produces it. Here a request's blocks are
 * written when it releases them (finished, preempted, aborted), which differs only
 * while the request runs; that is also when their contexts' tags are known.
 *
 * Costs: a reload takes the host link's time (kv-links.ts: PCIe Gen5 ×16 on H100 SXM,
 * 64 GB/s each way), charged to the step that admits the request (vLLM loads
 * asynchronously while the request waits in WAITING_FOR_REMOTE_KVS; here the batch
 * waits too, a pessimistic simplification). A write is free in time: it goes the
 * other way (device → host, PCIe is full duplex) and off the critical path, as vLLM's
 * OffloadingConnector stores on its own CUDA stream; its bytes are counted. Blocks of
 * a dropped context are not written at all.
 */

/*
 * Host DRAM per node, from the system datasheets: NVIDIA DGX H100, 2 TB system memory
 * (8 × H100 SXM); NVIDIA DGX A100 640GB (8 × A100 80GB SXM), 2 TB. ASSUMED: half of it
 * holds KV (the rest: the OS, the engine processes, pinned staging buffers). An 8B
 * engine takes one GPU (8 engines a node), a 70B TP4 engine four (2 a node).
 */
const TB = 1e12;
export const HOST_KV_BYTES_PER_NODE: Readonly<Record<EngineProfileName, number>> = Object.freeze({
  "llama-3.1-8b-h100": 0.5 * 2 * TB,
  "llama-3.1-70b-h100-tp4": 0.5 * 2 * TB,
  "llama-3.1-8b-a100": 0.5 * 2 * TB,
});

/** When a GPU's block reaches the tier: as its request releases it, or only as the GPU evicts it. */
export type HostKvWritePolicy = "write-through" | "write-back";

export interface HostKvTierOptions {
  link: KvLinkProfile;
  /** Default write-through (see above). */
  writePolicy?: HostKvWritePolicy;
  blockSize: number;
  /** Capacity in blocks of `blockSize` tokens. */
  capacityBlocks: number;
  /** How kept contexts are ordered among themselves (as on the GPUs; default furthest-return). */
  keptOrder?: KeptOrder;
}

export interface HostKvTierStats {
  capacityBlocks: number;
  heldBlocks: number;
  /** Blocks written (a hash the tier did not hold). */
  storedBlocks: number;
  /** Blocks found by lookups (reloads). */
  hitBlocks: number;
}

/** A node's tier sized from the profile's datasheet figures (or `capacityBlocks`). */
export function hostKvTierFor(
  profile: EngineProfileName,
  blockSize: number,
  options: { capacityBlocks?: number | undefined; keptOrder?: KeptOrder | undefined; writePolicy?: HostKvWritePolicy | undefined } = {},
): HostKvTier {
  const link = KV_LINKS[profile];
  const blocks = options.capacityBlocks ?? Math.floor(HOST_KV_BYTES_PER_NODE[profile] / (blockSize * link.kvBytesPerToken));
  return new HostKvTier({
    link,
    blockSize,
    capacityBlocks: blocks,
    ...(options.keptOrder === undefined ? {} : { keptOrder: options.keptOrder }),
    ...(options.writePolicy === undefined ? {} : { writePolicy: options.writePolicy }),
  });
}

export class HostKvTier {
  readonly link: KvLinkProfile;
  readonly writePolicy: HostKvWritePolicy;
  readonly blockSize: number;
  readonly capacityBlocks: number;
  readonly bytesPerBlock: number;
  private readonly slots: KvBlockPool;
  private readonly retention: KvRetentionIndex;
  private readonly found: number[] = [];
  private readonly one: number[] = [0];
  private storedBlocks = 0;
  private hitBlocks = 0;

  constructor(options: HostKvTierOptions) {
    if (!Number.isInteger(options.capacityBlocks) || options.capacityBlocks < 1) throw new RangeError("capacityBlocks must be a positive integer");
    this.link = options.link;
    this.writePolicy = options.writePolicy ?? "write-through";
    this.blockSize = options.blockSize;
    this.capacityBlocks = options.capacityBlocks;
    this.bytesPerBlock = options.blockSize * options.link.kvBytesPerToken;
    // Host slots are never referenced by a request: every one is evictable, in LRU order by rank.
    this.slots = new KvBlockPool(options.capacityBlocks);
    this.retention = new KvRetentionIndex(this.slots, options.keptOrder);
    this.slots.onEviction((slot) => this.retention.detach(slot));
  }

  /** Milliseconds to reload `tokens` tokens of KV from host memory. */
  loadMs(tokens: number): number {
    return kvTransferMs(this.link, tokens, "host");
  }

  /**
   * A block a GPU released (write-through) or evicted (write-back), with the contexts it
   * belongs to there (their keep or drop carries over). True when it was written (the
   * tier did not hold it); a block it held already is only made recent.
   */
  store(hash: number, contexts: readonly RetainedContext[], nowMs: number): boolean {
    this.retention.expire(nowMs);
    const one = this.one;
    let slot = this.slots.blockOf(hash);
    const written = slot === undefined;
    if (slot === undefined) {
      slot = this.slots.allocate();
      this.slots.register(slot, hash);
      this.storedBlocks++;
    } else {
      this.slots.reference([slot]);
    }
    one[0] = slot;
    for (const context of contexts) {
      const here = this.retention.tag(context.tag, one);
      // Within a microsecond is the same keep (now + (end − now) need not give back end exactly): a renewal re-ranks the whole context.
      if (here !== undefined && (here.action !== context.action || (context.action === "keep" && Math.abs(here.keepUntilMs - context.keepUntilMs) > 1e-3))) {
        this.retention.apply(context.tag, signalOf(context, nowMs), nowMs);
      }
    }
    // Released after tagging, so it enters the queue of its rank, most recent.
    this.slots.release(one);
    return written;
  }

  /**
   * How many of `hashes[from..maxBlocks)` the tier holds, consecutively from `from`
   * (a reload continues the GPU's cached prefix); those blocks become the most recent.
   */
  lookup(hashes: readonly number[], from: number, maxBlocks: number): number {
    const found = this.found;
    found.length = 0;
    const limit = Math.min(maxBlocks, hashes.length);
    for (let k = from; k < limit; k++) {
      const slot = this.slotOf(hashes[k] ?? Number.NaN);
      if (slot === undefined) break;
      found.push(slot);
    }
    this.slots.reference(found);
    this.slots.release(found);
    this.hitBlocks += found.length;
    return found.length;
  }

  /** A program's word on a context, as on a GPU (EngineModel.setRetention forwards it). */
  setRetention(tag: string, signal: RetentionSignal, nowMs: number): boolean {
    this.retention.expire(nowMs);
    return this.retention.apply(tag, signal, nowMs);
  }

  /** Ends keeps due by `nowMs`. */
  expire(nowMs: number): void {
    this.retention.expire(nowMs);
  }

  holds(hash: number): boolean {
    return this.slotOf(hash) !== undefined;
  }

  stats(): HostKvTierStats {
    return {
      capacityBlocks: this.capacityBlocks,
      heldBlocks: this.slots.numCachedBlocks,
      storedBlocks: this.storedBlocks,
      hitBlocks: this.hitBlocks,
    };
  }

  private slotOf(hash: number): number | undefined {
    return this.slots.blockOf(hash);
  }
}

/** The hint that gives a context on this tier the standing it has on the GPU it left. */
function signalOf(context: RetainedContext, nowMs: number): RetentionSignal {
  if (context.action === "keep" && context.keepUntilMs > nowMs) return { action: "keep", keep_ms: context.keepUntilMs - nowMs };
  if (context.action === "drop") return { action: "drop" };
  return { action: "normal" };
}
