import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EngineModel } from "../../src/sim/engine-model.js";
import { EvictionRank, KvBlockPool } from "../../src/sim/kv-cache.js";
import { type KeptOrder, KvRetentionIndex, type RetainedContext, type RetentionSignal } from "../../src/sim/kv-retention-index.js";
import { drain, finishedOf, smallProfile, tokens } from "./model-helpers.js";

/** A pool whose every block holds a cached hash and is referenced by one of the given contexts. */
function heldPool(numBlocks: number, keptOrder?: KeptOrder) {
  const pool = new KvBlockPool(numBlocks);
  const index = new KvRetentionIndex(pool, keptOrder);
  pool.onEviction((block) => index.detach(block));
  for (let b = 0; b < numBlocks; b++) pool.register(pool.allocate(), 1_000 + b);
  /** A request that held `blocks` under `tag` (undefined: untagged) ends. */
  const end = (tag: string | undefined, blocks: number[]) => {
    const context = tag === undefined ? undefined : index.open(tag);
    index.releasing(context, blocks);
    pool.release(blocks);
    index.leave(context);
  };
  const evictionOrder = () => Array.from({ length: numBlocks }, () => pool.allocate());
  return { pool, index, end, evictionOrder };
}

describe("branch-aware eviction order", () => {
  it("normal: plain LRU, a request's last block first", () => {
    const { end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end("b", [2, 3]);
    end(undefined, [4, 5]);
    expect(evictionOrder()).toEqual([1, 0, 3, 2, 5, 4]);
  });

  it("drop: the dropped context goes before every other, even when it was used last", () => {
    const { index, end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end(undefined, [2, 3]);
    end("b", [4, 5]);
    expect(index.apply("b", { action: "drop" }, 0)).toBe(true);
    expect(evictionOrder()).toEqual([5, 4, 1, 0, 3, 2]);
  });

  it("keep: the kept context goes after every ordinary one, even when it is the oldest", () => {
    const { index, end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end("b", [2, 3]);
    end(undefined, [4, 5]);
    index.apply("a", { action: "keep", keep_ms: 1_000 }, 0);
    expect(evictionOrder()).toEqual([3, 2, 5, 4, 1, 0]);
  });

  it("among kept contexts, the one expected back furthest away goes first, its last block first", () => {
    const { index, end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end("b", [2, 3]);
    end(undefined, [4, 5]);
    // b was kept last, but a is expected back later (5 s against 1 s).
    index.apply("a", { action: "keep", keep_ms: 5_000 }, 0);
    index.apply("b", { action: "keep", keep_ms: 1_000 }, 10);
    expect(evictionOrder()).toEqual([5, 4, 1, 0, 3, 2]);
  });

  it("the latest-kept order (the older rule, for comparison) evicts the context kept last first whatever its return", () => {
    const { index, end, evictionOrder } = heldPool(6, "latest-kept");
    end("a", [0, 1]);
    end("b", [2, 3]);
    end(undefined, [4, 5]);
    index.apply("a", { action: "keep", keep_ms: 5_000 }, 0);
    index.apply("b", { action: "keep", keep_ms: 1_000 }, 10);
    // A renewal does not move a context in this order.
    index.apply("a", { action: "keep", keep_ms: 9_000 }, 20);
    expect(evictionOrder()).toEqual([5, 4, 3, 2, 1, 0]);
  });

  it("a renewed keep that moves a context's return moves it among the kept", () => {
    const { index, end, pool, evictionOrder } = heldPool(4);
    end("a", [0, 1]);
    end("b", [2, 3]);
    index.apply("a", { action: "keep", keep_ms: 1_000 }, 0);
    index.apply("b", { action: "keep", keep_ms: 2_000 }, 0);
    expect(pool.freeQueue(EvictionRank.kept)).toEqual([3, 2, 1, 0]);
    // A tool event: a is back in 8 s now, past b.
    index.apply("a", { action: "keep", keep_ms: 8_000 }, 100);
    expect(evictionOrder()).toEqual([1, 0, 3, 2]);
  });

  it("a block two kept contexts share is needed at the sooner return: it goes after the later one's own blocks", () => {
    const { pool, index, end, evictionOrder } = heldPool(3);
    pool.reference([0]);
    end("soon", [0, 1]);
    end("late", [0, 2]);
    index.apply("soon", { action: "keep", keep_ms: 1_000 }, 0);
    index.apply("late", { action: "keep", keep_ms: 5_000 }, 0);
    expect(evictionOrder()).toEqual([2, 1, 0]);
  });

  it("a keep that expires ranks by recency again, its end counting as a use", () => {
    const { index, end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end("b", [2, 3]);
    end(undefined, [4, 5]);
    index.apply("b", { action: "keep", keep_ms: 100 }, 0);
    index.expire(99);
    expect(index.context("b")?.action).toBe("keep");
    index.expire(100);
    expect(index.context("b")?.action).toBe("normal");
    expect(evictionOrder()).toEqual([1, 0, 5, 4, 3, 2]);
  });

  it("a later keep extends an earlier one; normal withdraws a keep at once", () => {
    const { index, end, pool } = heldPool(4);
    end("a", [0, 1]);
    end("b", [2, 3]);
    index.apply("a", { action: "keep", keep_ms: 100 }, 0);
    index.apply("a", { action: "keep", keep_ms: 500 }, 50);
    index.expire(200);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.kept);
    index.expire(550);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.ordinary);
    index.apply("b", { action: "keep", keep_ms: 500 }, 600);
    index.apply("b", { action: "normal" }, 610);
    expect(pool.rankOfBlock(2)).toBe(EvictionRank.ordinary);
  });

  it("a shared block is kept if any tag keeps it and dropped only when every tag drops it", () => {
    const { pool, index, end } = heldPool(4);
    // Block 0 is a fork's parent context: both branches used it.
    pool.reference([0]);
    end("parent", [0, 1]);
    end("branch", [0, 2]);
    index.apply("parent", { action: "drop" }, 0);
    expect(pool.rankOfBlock(1)).toBe(EvictionRank.dropped);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.ordinary);
    index.apply("branch", { action: "keep", keep_ms: 1_000 }, 0);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.kept);
    index.apply("branch", { action: "drop" }, 0);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.dropped);
    expect(pool.freeQueue(EvictionRank.dropped).sort()).toEqual([0, 1, 2]);
  });

  it("a context with a request in the engine ranks as kept until the request leaves", () => {
    const { pool, index, end } = heldPool(4);
    end("a", [0, 1]);
    end("b", [2, 3]);
    const waiting = index.open("a");
    expect(pool.freeQueue(EvictionRank.kept)).toEqual([1, 0]);
    index.leave(waiting);
    expect(pool.freeQueue(EvictionRank.ordinary)).toEqual([3, 2, 1, 0]);
  });

  it("a context a queued request will read goes after every kept one, its last block first", () => {
    // bench:evolve's failure: with every context in a tool wait, the one context whose call was already
    // queued went first (to the front of the kept queue) and was recomputed at once.
    const { index, end, evictionOrder } = heldPool(6);
    end("a", [0, 1]);
    end("b", [2, 3]);
    end("c", [4, 5]);
    index.apply("a", { action: "keep", keep_ms: 1_000 }, 0);
    index.apply("b", { action: "keep", keep_ms: 1_000 }, 10);
    index.open("c");
    expect(evictionOrder()).toEqual([3, 2, 1, 0, 5, 4]);
  });

  it("a block an untagged request used is never dropped by a tag's drop", () => {
    const { pool, index, end } = heldPool(2);
    pool.reference([0]);
    end("a", [0, 1]);
    end(undefined, [0]);
    index.apply("a", { action: "drop" }, 0);
    expect(pool.rankOfBlock(0)).toBe(EvictionRank.ordinary);
    expect(pool.rankOfBlock(1)).toBe(EvictionRank.dropped);
  });

  it("a hint on a context the pool does not hold is not applied; an evicted context is forgotten", () => {
    const { index, end, pool } = heldPool(2);
    expect(index.apply("nobody", { action: "keep", keep_ms: 10 }, 0)).toBe(false);
    end("a", [0, 1]);
    expect(index.size).toBe(1);
    pool.allocate();
    pool.allocate();
    expect(index.size).toBe(0);
    expect(index.apply("a", { action: "drop" }, 0)).toBe(false);
  });
});

describe("EngineModel.setRetention", () => {
  /**
   * Two tagged 4-block contexts and one untagged finish on a 16-block engine (4 blocks
   * never used), then a 10-block prompt evicts 10 blocks: the 4 unused, then 6 more.
   */
  function pressured(hint: (model: EngineModel, now: number) => void) {
    const model = new EngineModel({ profile: smallProfile(16) });
    let t = 0;
    const contexts = { a: tokens(64, 0, "a"), b: tokens(64, 0, "b"), u: tokens(64, 0, "u") };
    for (const [id, prompt] of Object.entries(contexts)) {
      model.submit({ id, promptTokens: prompt, outputTokens: 1, ...(id === "u" ? {} : { retentionTag: `prog:main:${id}` }) }, t);
      t = drain(model, t).endMs;
    }
    hint(model, t);
    model.submit({ id: "flood", promptTokens: tokens(150, 0, "z"), outputTokens: 1 }, t);
    t = drain(model, t).endMs;
    const cached: Record<string, number> = {};
    for (const [id, prompt] of Object.entries(contexts)) cached[id] = model.cachedPrefixTokens(prompt);
    return { cached, stats: model.stats() };
  }

  it("without hints the oldest contexts are evicted (LRU)", () => {
    const { cached } = pressured(() => {});
    // Queue: unused 12–15, a (last block first) 3 2 1 0, b 7 6 5 4, u 11 10 9 8.
    expect(cached).toEqual({ a: 0, b: 32, u: 64 });
  });

  it("a kept context survives pressure that evicts an untagged one, and a dropped one goes first", () => {
    const { cached, stats } = pressured((model, now) => {
      expect(model.setRetention("prog:main:a", { action: "keep", keep_ms: 60_000 }, now)).toBe(true);
      expect(model.setRetention("prog:main:b", { action: "drop" }, now)).toBe(true);
      expect(model.setRetention("prog:main:unknown", { action: "drop" }, now)).toBe(false);
    });
    // Dropped b goes first, then unused and u's last two; kept a is untouched.
    expect(cached).toEqual({ a: 64, b: 0, u: 32 });
    expect(stats.keepsApplied).toBe(1);
    expect(stats.dropsApplied).toBe(1);
  });

  it("an expired keep protects nothing: its end counts as the context's last use", () => {
    // Keep a for 1 ms, then use b again: the keep ends at that step, so a ranks after u (and b's 4th block,
    // which b-again recomputes into a duplicate block of its own), before b's reused prefix.
    const touchB = (model: EngineModel, now: number) => {
      model.submit({ id: "b-again", promptTokens: tokens(64, 0, "b"), outputTokens: 1 }, now);
      return drain(model, now).endMs;
    };
    const expired = pressured((model, now) => {
      model.setRetention("prog:main:a", { action: "keep", keep_ms: 1 }, now);
      touchB(model, now + 5);
    });
    // Queue: unused 13–15, b's 4th block, u, a, b-again's blocks: the flood takes 3 + 1 + 4 and a's last 2.
    expect(expired.cached).toEqual({ a: 32, b: 48, u: 0 });
    const kept = pressured((model, now) => {
      model.setRetention("prog:main:a", { action: "keep", keep_ms: 60_000 }, now);
      touchB(model, now + 5);
    });
    expect(kept.cached).toEqual({ a: 64, b: 32, u: 0 });
    // Never kept, a is the oldest: it goes first, and u keeps half.
    const never = pressured((model, now) => void touchB(model, now + 5));
    expect(never.cached).toEqual({ a: 0, b: 48, u: 32 });
  });
});

describe("a waiting request claims its cached prefix", () => {
  /** Generation 0 of a context finishes; generation 1 (sharing 3 blocks) waits while gen 0 is dropped and a flood runs first. */
  function compaction(tagNewGeneration: boolean): number {
    const model = new EngineModel({ profile: smallProfile(16) });
    model.submit({ id: "g0", promptTokens: tokens(64, 0, "c"), outputTokens: 1, retentionTag: "p:main:0" }, 0);
    const t = drain(model).endMs;
    const next = [...tokens(48, 0, "c"), ...tokens(16, 0, "s")];
    model.submit({ id: "g1", promptTokens: next, outputTokens: 1, ...(tagNewGeneration ? { retentionTag: "p:main:1" } : {}) }, t);
    model.setRetention("p:main:0", { action: "drop" }, t);
    // 13 blocks, admitted first: the dropped blocks go before the 12 never used.
    model.submit({ id: "flood", promptTokens: tokens(200, 0, "z"), outputTokens: 1, priority: -1 }, t);
    return finishedOf(drain(model, t).events, "g1").usage.cachedTokens;
  }

  it("so dropping the generation it replaces does not evict the prefix they share", () => {
    expect(compaction(true)).toBe(48);
    // Untagged, it claims nothing: the shared prefix went with the dropped generation.
    expect(compaction(false)).toBe(0);
  });
});

describe("pool invariants under random operations (fast-check)", () => {
  const TAGS = ["t0", "t1", "t2"] as const;
  type Op =
    | { kind: "start"; tag: number; fresh: number; hits: number }
    | { kind: "end"; which: number }
    | { kind: "hint"; tag: number; signal: RetentionSignal }
    | { kind: "tick"; ms: number };
  const signal = fc.oneof(
    fc.record({ action: fc.constant("keep" as const), keep_ms: fc.integer({ min: 1, max: 200 }) }),
    fc.constant<RetentionSignal>({ action: "normal" }),
    fc.constant<RetentionSignal>({ action: "drop" }),
  );
  const op: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant("start" as const), tag: fc.integer({ min: -1, max: TAGS.length - 1 }), fresh: fc.integer({ min: 0, max: 4 }), hits: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant("end" as const), which: fc.nat() }),
    fc.record({ kind: fc.constant("hint" as const), tag: fc.integer({ min: 0, max: TAGS.length - 1 }), signal }),
    fc.record({ kind: fc.constant("tick" as const), ms: fc.integer({ min: 1, max: 30 }) }),
  );

  it("free + referenced = total, no block queued twice or while referenced, ranks follow the tags, drops go first, kept blocks by key", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), fc.constantFrom<KeptOrder>("furthest-return", "latest-kept"), (ops, keptOrder) => {
        const numBlocks = 12;
        const pool = new KvBlockPool(numBlocks);
        const index = new KvRetentionIndex(pool, keptOrder);
        const untaggedUse = new Set<number>();
        pool.onEviction((block) => {
          index.detach(block);
          untaggedUse.delete(block);
        });
        const live: { context: RetainedContext | undefined; blocks: number[] }[] = [];
        let now = 0;
        let nextHash = 1;
        for (const step of ops) {
          if (step.kind === "start") {
            const cachedBlocks = Array.from({ length: numBlocks }, (_, b) => b).filter((b) => pool.isCached(b));
            const hits = cachedBlocks.slice(0, step.hits);
            if (step.fresh + pool.countUnreferenced(hits) > pool.numFree) continue;
            pool.reference(hits);
            const blocks = [...hits];
            const held = new Set(live.flatMap((r) => r.blocks).concat(hits));
            for (let i = 0; i < step.fresh; i++) {
              const queues = [EvictionRank.dropped, EvictionRank.ordinary, EvictionRank.kept].map((r) => pool.freeQueue(r));
              const b = pool.allocate();
              // A referenced block is never evicted, and the lowest non-empty rank goes first.
              expect(held.has(b)).toBe(false);
              expect(b).toBe(queues.find((q) => q.length > 0)?.[0]);
              pool.register(b, nextHash++);
              blocks.push(b);
              held.add(b);
            }
            const tag = TAGS[step.tag];
            live.push({ context: tag === undefined ? undefined : index.open(tag), blocks });
          } else if (step.kind === "end") {
            if (live.length === 0) continue;
            const [request] = live.splice(step.which % live.length, 1);
            if (request === undefined) continue;
            index.releasing(request.context, request.blocks);
            if (request.context === undefined) for (const b of request.blocks) untaggedUse.add(b);
            pool.release(request.blocks);
            index.leave(request.context);
          } else if (step.kind === "hint") {
            index.apply(TAGS[step.tag] ?? "t0", step.signal, now);
          } else {
            now += step.ms;
            index.expire(now);
          }

          const queues = [EvictionRank.dropped, EvictionRank.ordinary, EvictionRank.kept].map((r) => pool.freeQueue(r));
          const queued = queues.flat();
          // The next eviction is the head of the lowest non-empty rank; each rank's next, its queue's head (kept:
          // the highest key's list, off the heap).
          expect(pool.nextVictim()).toBe(queued[0]);
          queues.forEach((queue, rank) => expect(pool.nextVictim(rank as EvictionRank)).toBe(queue[0]));
          const referenced = Array.from({ length: numBlocks }, (_, b) => b).filter((b) => pool.refCountOf(b) > 0);
          expect(new Set(queued).size).toBe(queued.length);
          expect(queued.length).toBe(pool.numFree);
          expect(queued.length + referenced.length).toBe(numBlocks);
          for (const b of referenced) expect(queued).not.toContain(b);
          const liveRefs = new Map<number, number>();
          for (const r of live) for (const b of r.blocks) liveRefs.set(b, (liveRefs.get(b) ?? 0) + 1);
          for (let b = 0; b < numBlocks; b++) expect(pool.refCountOf(b)).toBe(liveRefs.get(b) ?? 0);
          // Each queued block sits in the queue of the rank its tags give it.
          queues.forEach((queue, rank) => {
            for (const b of queue) {
              const contexts = index.tagsOf(b).map((tag) => index.context(tag));
              const actions = contexts.map((context) => context?.action);
              const live = contexts.some((context) => (context?.liveRequests ?? 0) > 0);
              const expected = actions.includes("keep") || live
                ? EvictionRank.kept
                : actions.length > 0 && actions.every((a) => a === "drop") && !untaggedUse.has(b)
                  ? EvictionRank.dropped
                  : EvictionRank.ordinary;
              expect(rank).toBe(expected);
            }
          });
          // Kept blocks leave highest key first: a block with a live request's context last (it is read now),
          // else its kept contexts' soonest key (furthest-return: the keep's end).
          const keptKeys = queues[EvictionRank.kept]!.map((b) => {
            const contexts = index.tagsOf(b).map((tag) => index.context(tag));
            if (contexts.some((context) => (context?.liveRequests ?? 0) > 0)) return Number.NEGATIVE_INFINITY;
            const keys = contexts.filter((context) => context?.action === "keep").map((context) => (keptOrder === "furthest-return" ? context?.keepUntilMs : context?.keptKey) ?? Number.NaN);
            return Math.min(...keys);
          });
          keptKeys.forEach((key, i) => {
            expect(Number.isNaN(key)).toBe(false);
            if (i > 0) expect(key).toBeLessThanOrEqual(keptKeys[i - 1]!);
          });
          // No keep outlives its end.
          for (const tag of TAGS) {
            const context = index.context(tag);
            if (context?.action === "keep") expect(context.keepUntilMs).toBeGreaterThan(now);
          }
        }
        // Evicting everything free takes the queues in the order they list (the kept lists' heap included).
        const expected = [EvictionRank.dropped, EvictionRank.ordinary, EvictionRank.kept].flatMap((r) => pool.freeQueue(r));
        expect(Array.from({ length: pool.numFree }, () => pool.allocate())).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });
});
