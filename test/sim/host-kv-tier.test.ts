import { describe, expect, it } from "vitest";
import { EngineModel } from "../../src/sim/engine-model.js";
import { HOST_KV_BYTES_PER_NODE, HostKvTier, hostKvTierFor, type HostKvWritePolicy } from "../../src/sim/host-kv-tier.js";
import { KV_LINKS } from "../../src/sim/kv-links.js";
import { NodeKvLedger } from "../../src/sim/node-kv-ledger.js";
import { StepShape, stepDurationMs } from "../../src/sim/timing.js";
import { drain, finishedOf, smallProfile, tokens } from "./model-helpers.js";

const LINK = KV_LINKS["llama-3.1-8b-h100"];
/** 16 blocks of 16 tokens: a 160-token context and a 200-token flood cannot both stay. */
const PROFILE = smallProfile(16);

function node(hostBlocks: number | undefined, writePolicy: HostKvWritePolicy = "write-back") {
  const hostTier = hostBlocks === undefined ? undefined : new HostKvTier({ link: LINK, blockSize: 16, capacityBlocks: hostBlocks, writePolicy });
  const nodeLedger = new NodeKvLedger();
  const engine = () => new EngineModel({ profile: PROFILE, hostTier, nodeLedger });
  return { hostTier, engine };
}

/** Context A (10 full blocks) finishes on `model`, then a `floodTokens` prompt pushes it out of the GPU. */
function evictContext(model: EngineModel, floodTokens: number, retentionTag?: string): number {
  model.submit({ id: "a", promptTokens: tokens(160, 0, "a"), outputTokens: 1, ...(retentionTag ? { retentionTag } : {}) }, 0);
  let t = drain(model).endMs;
  model.submit({ id: "flood", promptTokens: tokens(floodTokens, 0, "z"), outputTokens: 1 }, t);
  t = drain(model, t).endMs;
  return t;
}

/** Context A plus one new block, again. */
function returnTo(model: EngineModel, t: number) {
  model.submit({ id: "a-again", promptTokens: [...tokens(160, 0, "a"), ...tokens(16, 0, "n")], outputTokens: 1 }, t);
  const run = drain(model, t);
  return { usage: finishedOf(run.events, "a-again").usage, firstStepMs: run.durations[0] ?? Number.NaN, stats: model.stats() };
}

describe("host KV tier, write-back (a block reaches it as the GPU evicts it)", () => {
  it("without it, a context evicted from the GPU is recomputed, and the ledger says so", () => {
    const { engine } = node(undefined);
    const model = engine();
    const t = evictContext(model, 200);
    // The flood took the 6 unused blocks, then A's last 7 (released last block first); A keeps 3 on the GPU.
    expect(model.cachedPrefixTokens(tokens(160, 0, "a"))).toBe(48);
    const { usage, stats } = returnTo(model, t);
    expect(usage.cachedTokens).toBe(48);
    expect(stats.recomputedTokens).toBe(112);
    expect(stats.hostHitTokens).toBe(0);
  });

  it("reloads the evicted blocks from host memory at the PCIe link's cost instead of recomputing them", () => {
    const { engine } = node(64);
    const model = engine();
    const t = evictContext(model, 200);
    const { usage, stats, firstStepMs } = returnTo(model, t);
    expect(usage.cachedTokens).toBe(160);
    expect(stats.prefixCacheHits).toBe(48);
    expect(stats.hostHitTokens).toBe(112);
    expect(stats.recomputedTokens).toBe(0);
    expect(stats.hostLoadBytes).toBe(112 * 128 * 1024);
    // Written on eviction: A's 7 blocks, then the flood's blocks the reload pushed out.
    expect(stats.hostStoreBytes).toBeGreaterThanOrEqual(7 * 16 * 128 * 1024);
    // The step prefills 16 new tokens after 160 in the cache and waits for 112 tokens over 64 GB/s.
    const shape = new StepShape();
    shape.addPrefill(160, 16);
    const loadMs = (112 * 131_072) / 64e9 * 1_000;
    expect(firstStepMs).toBeCloseTo(stepDurationMs(PROFILE, shape) + loadMs, 9);
    expect(loadMs).toBeCloseTo(0.229, 3);
  });

  it("after the host tier evicted part of it (its own LRU), that part is recomputed", () => {
    const { engine, hostTier } = node(2);
    const model = engine();
    const t = evictContext(model, 200);
    // Stored in eviction order 9, 8, …, 3: two slots keep the last two, blocks 4 and 3.
    const { usage, stats } = returnTo(model, t);
    expect(usage.cachedTokens).toBe(48 + 32);
    expect(stats.hostHitTokens).toBe(32);
    expect(stats.recomputedTokens).toBe(80);
    expect(hostTier?.stats().heldBlocks).toBe(2);
  });

  it("is shared by a node's engines: a context prefilled on one is reloaded by another", () => {
    const { engine } = node(64);
    const first = engine();
    const second = engine();
    // A 250-token flood takes all 16 blocks: A leaves the first GPU entirely.
    evictContext(first, 250);
    expect(first.cachedPrefixTokens(tokens(160, 0, "a"))).toBe(0);
    const { usage, stats } = returnTo(second, 0);
    expect(usage.cachedTokens).toBe(160);
    expect(stats.hostHitTokens).toBe(160);
    expect(stats.recomputedTokens).toBe(0);
    // Only A's 10 blocks were written: the 6 never-used blocks held nothing, the flood's are still on the GPU.
    expect(first.stats().hostStoreBytes).toBe(10 * 16 * 128 * 1024);
  });

  it("writes no block of a dropped context: it is recomputed if it is ever needed", () => {
    const { engine } = node(64);
    const model = engine();
    model.submit({ id: "a", promptTokens: tokens(160, 0, "a"), outputTokens: 1, retentionTag: "p:main:0" }, 0);
    let t = drain(model).endMs;
    expect(model.setRetention("p:main:0", { action: "drop" }, t)).toBe(true);
    model.submit({ id: "flood", promptTokens: tokens(200, 0, "z"), outputTokens: 1 }, t);
    t = drain(model, t).endMs;
    // The dropped context went first (10 blocks), then 3 unused: none of it was written.
    expect(model.stats().hostStoreBytes).toBe(0);
    const { stats } = returnTo(model, t);
    expect(stats.hostHitTokens).toBe(0);
    expect(stats.recomputedTokens).toBe(160);
  });

});

describe("host KV tier, write-through (vLLM's, SGLang's and LMCache's way: every computed block)", () => {
  it("is the default", () => {
    expect(new HostKvTier({ link: LINK, blockSize: 16, capacityBlocks: 4 }).writePolicy).toBe("write-through");
    expect(hostKvTierFor("llama-3.1-8b-h100", 16).writePolicy).toBe("write-through");
  });

  it.each([
    ["write-through", 160, 0],
    ["write-back", 0, 160],
  ] as const)("%s: a context one engine still holds is reloaded by another engine of the node (a role switch, a move)", (policy, hostHits, recomputed) => {
    const { engine } = node(64, policy);
    const first = engine();
    const second = engine();
    first.submit({ id: "a", promptTokens: tokens(160, 0, "a"), outputTokens: 1 }, 0);
    drain(first);
    // Nothing pushed A out of the first GPU: only a copy made as it was computed can serve the second.
    expect(first.cachedPrefixTokens(tokens(160, 0, "a"))).toBe(160);
    const { usage, stats } = returnTo(second, 0);
    expect(stats.hostHitTokens).toBe(hostHits);
    expect(usage.cachedTokens).toBe(hostHits);
    expect(stats.recomputedTokens).toBe(recomputed);
    // Written once, as the request released its 10 full blocks; write-back wrote nothing (no eviction).
    expect(first.stats().hostStoreBytes).toBe(policy === "write-through" ? 10 * 16 * 128 * 1024 : 0);
  });

  it("writes a block once: a context read again only becomes recent on the tier", () => {
    const { engine } = node(64, "write-through");
    const model = engine();
    const t = evictContext(model, 200);
    const before = model.stats().hostStoreBytes;
    // A's 10 blocks and the flood's 12, each once.
    expect(before).toBe((10 + 12) * 16 * 128 * 1024);
    const { usage, stats } = returnTo(model, t);
    expect(usage.cachedTokens).toBe(160);
    expect(stats.hostHitTokens).toBe(112);
    // The return wrote only its one new block; A's were on the tier already.
    expect(stats.hostStoreBytes - before).toBe(1 * 16 * 128 * 1024);
  });

  it("ranks a dropped context first on the tier too, even when it was written last", () => {
    const { engine } = node(20, "write-through");
    const model = engine();
    const reader = engine();
    let t = 0;
    for (const [id, tag] of [["b", "p:b:0"], ["a", "p:a:0"]] as const) {
      model.submit({ id, promptTokens: tokens(160, 0, id), outputTokens: 1, retentionTag: tag }, t);
      t = drain(model, t).endMs;
    }
    expect(model.setRetention("p:a:0", { action: "drop" }, t)).toBe(true);
    // A third context's 10 blocks fill the tier past its 20: LRU would evict B (older); the drop evicts A.
    model.submit({ id: "c", promptTokens: tokens(160, 0, "c"), outputTokens: 1 }, t);
    t = drain(model, t).endMs;
    reader.submit({ id: "read-b", promptTokens: [...tokens(160, 0, "b"), ...tokens(16, 0, "n")], outputTokens: 1 }, t);
    reader.submit({ id: "read-a", promptTokens: [...tokens(160, 0, "a"), ...tokens(16, 0, "m")], outputTokens: 1 }, t);
    const run = drain(reader, t);
    expect(finishedOf(run.events, "read-b").usage.cachedTokens).toBe(160);
    expect(finishedOf(run.events, "read-a").usage.cachedTokens).toBe(0);
  });

  it("sizes a node's tier from the datasheets: half of a DGX H100's 2 TB, at 128 KiB a token for 8B", () => {
    const tier = hostKvTierFor("llama-3.1-8b-h100", 16);
    expect(HOST_KV_BYTES_PER_NODE["llama-3.1-8b-h100"]).toBe(1e12);
    expect(tier.capacityBlocks).toBe(Math.floor(1e12 / (16 * 131_072)));
    expect(tier.link.hostLinkGBps).toBe(64);
    expect(hostKvTierFor("llama-3.1-8b-a100", 16).loadMs(10_000)).toBeCloseTo((10_000 * 131_072) / 32e9 * 1_000, 9);
  });
});
