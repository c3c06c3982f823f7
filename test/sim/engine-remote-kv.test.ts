import { describe, expect, it } from "vitest";
import { EngineModel } from "../../src/sim/engine-model.js";
import { drain, finishedOf, smallProfile, tokens } from "./model-helpers.js";

/*
 * A disaggregated call's decode on the engine model (EngineRequest.remoteKv), as vLLM's
 * scheduler serves one under a KV connector: it waits for blocks for its whole prompt,
 * owns them from then on, pulls the KV (the transfer runs from that moment), and once the
 * KV is in computes only the prompt's last token.
 */

// 40 blocks of 16 tokens: 640 tokens of KV.
const KV_BLOCKS = 40;
const engine = (kvPullMs: (tokens: number) => number, options: { maxNumSeqs?: number } = {}) =>
  new EngineModel({ profile: smallProfile(KV_BLOCKS), kvPullMs, ...options });

describe("a remote-KV (disaggregated decode) request", () => {
  it("waits for room on a full engine instead of recomputing, pulls once it has room, then decodes with no prompt compute", () => {
    const model = engine((t) => t / 100);
    // 400 prompt tokens growing to 600 (38 blocks): the 19 blocks of a 300-token prompt never fit beside it.
    model.submit({ id: "big", promptTokens: tokens(400, 0, "b"), maxTokens: 200, ignoreEos: true }, 0);
    const first = model.startStep(0) ?? 0;
    model.finishStep();
    model.submit({ id: "d", promptTokens: tokens(300, 0, "d"), maxTokens: 20, ignoreEos: true, remoteKv: {} }, first);
    const { events, pulls } = drain(model, first);

    const big = finishedOf(events, "big");
    const d = finishedOf(events, "d");
    expect(big.preemptions).toBe(0);
    // The pull started only when the big request had freed its blocks: it waited for room.
    expect(pulls).toHaveLength(1);
    expect(pulls[0]!.atMs).toBeGreaterThanOrEqual(big.timing.finishedMs);
    expect(d.remoteKv?.roomWaitMs).toBeCloseTo(pulls[0]!.atMs - first, 9);
    // The transfer (300 tokens at 100 a ms) ran from then, not from the submission, and the decode waited for it.
    expect(pulls[0]!.landsAtMs - pulls[0]!.atMs).toBeCloseTo(3, 9);
    expect(d.remoteKv?.kvWaitMs).toBeGreaterThanOrEqual(3);
    expect(d.timing.firstTokenMs).toBeGreaterThan(pulls[0]!.landsAtMs);
    // Then it computed only the prompt's last token (its logits) and decoded.
    expect(d.prefillTokens).toBe(1);
    expect(d.usage).toEqual({ promptTokens: 300, cachedTokens: 299, completionTokens: 20 });
    expect(d.remoteKv?.pulledTokens).toBe(299);
    expect(model.stats()).toMatchObject({ remoteKvPulls: 1, remoteKvRecomputedTokens: 0, remoteKvShortPulls: 0, kvUsage: 0, waiting: 0 });
  });

  it("is not scheduled before its transfer ends; the engine says when to step again", () => {
    const model = engine((t) => t / 10);
    model.submit({ id: "d", promptTokens: tokens(100), maxTokens: 3, ignoreEos: true, remoteKv: {} }, 50);
    // Admitted at once on an idle engine: nothing to compute while the 10 ms transfer runs.
    expect(model.startStep(50)).toBeUndefined();
    expect(model.takeKvPulls()).toEqual([{ requestId: "d", tokens: 100, atMs: 50, landsAtMs: 60 }]);
    expect(model.takeKvPulls()).toEqual([]);
    expect(model.isIdle).toBe(false);
    expect(model.numWaiting).toBe(1);
    expect(model.nextWakeMs()).toBe(60);
    expect(model.startStep(59)).toBeUndefined();
    const step = model.startStep(60);
    expect(step).toBeDefined();
    model.finishStep();
    const { events } = drain(model, 60 + (step ?? 0));
    const d = finishedOf(events, "d");
    expect(d.timing.firstTokenMs).toBeCloseTo(60 + (step ?? 0), 9);
    expect(d.remoteKv).toEqual({ pulledTokens: 99, roomWaitMs: 0, kvWaitMs: 10 });
    expect(model.nextWakeMs()).toBeUndefined();
  });

  it("pulls only what its own prefix cache lacks", () => {
    const model = engine((t) => t);
    model.submit({ id: "warm", promptTokens: tokens(64), outputTokens: 1 }, 0);
    const { endMs } = drain(model);
    model.submit({ id: "d", promptTokens: [...tokens(64), ...tokens(36, 900)], maxTokens: 2, ignoreEos: true, remoteKv: {} }, endMs);
    const { pulls, events } = drain(model, endMs);
    expect(pulls.map((p) => [p.tokens, p.landsAtMs - p.atMs])).toEqual([[36, 36]]);
    expect(finishedOf(events, "d").prefillTokens).toBe(1);
  });

  it("keeps its blocks while the KV comes: later admissions wait or take other blocks, none of its", () => {
    const model = engine(() => 1_000);
    model.submit({ id: "d", promptTokens: tokens(300, 0, "d"), maxTokens: 5, ignoreEos: true, remoteKv: {} }, 0);
    expect(model.startStep(0)).toBeUndefined();
    // 19 blocks are d's; 21 are left. x takes 21 of them (320 + 10 tokens), y (13 blocks) must wait for x.
    model.submit({ id: "x", promptTokens: tokens(320, 0, "x"), maxTokens: 10, ignoreEos: true }, 0);
    model.submit({ id: "y", promptTokens: tokens(200, 0, "y"), maxTokens: 5, ignoreEos: true }, 0);
    const { events } = drain(model, 0);
    const x = finishedOf(events, "x");
    const y = finishedOf(events, "y");
    const d = finishedOf(events, "d");
    expect(x.preemptions + y.preemptions + d.preemptions).toBe(0);
    expect(x.timing.firstTokenMs).toBeLessThan(1_000);
    expect(y.timing.firstTokenMs).toBeGreaterThan(x.timing.finishedMs);
    // Its KV was all there when it landed: no recompute.
    expect(d.timing.firstTokenMs).toBeGreaterThan(1_000);
    expect(d.prefillTokens).toBe(1);
    expect(model.stats().remoteKvRecomputedTokens).toBe(0);
  });

  it("frees its blocks when aborted while the KV comes, and once it is in but not yet scheduled", () => {
    const pulling = engine(() => 1_000);
    pulling.submit({ id: "d", promptTokens: tokens(300), maxTokens: 5, remoteKv: {} }, 0);
    expect(pulling.startStep(0)).toBeUndefined();
    expect(pulling.stats().kvBlocksFree).toBe(KV_BLOCKS - 19);
    expect(pulling.abort("d")).toBe(true);
    expect(pulling.stats()).toMatchObject({ kvBlocksFree: KV_BLOCKS, kvUsage: 0, waiting: 0, aborted: 1 });
    expect(pulling.isIdle).toBe(true);
    expect(pulling.nextWakeMs()).toBeUndefined();
    expect(pulling.startStep(1_000)).toBeUndefined();

    // Two batch slots, big's and z's (admitted while d's KV came): d's KV is in, but it waits for a slot.
    const full = new EngineModel({ profile: smallProfile(100), kvPullMs: () => 1_000, maxNumSeqs: 2 });
    const step = (now: number) => {
      const d = full.startStep(now);
      full.finishStep();
      return now + (d ?? 0);
    };
    full.submit({ id: "big", promptTokens: tokens(100, 0, "b"), maxTokens: 300, ignoreEos: true }, 0);
    let now = step(0);
    full.submit({ id: "d", promptTokens: tokens(100, 0, "l"), maxTokens: 5, remoteKv: {} }, now);
    now = step(now);
    const [pull] = full.takeKvPulls();
    full.submit({ id: "z", promptTokens: tokens(16, 0, "z"), maxTokens: 300, ignoreEos: true }, now);
    while (now <= (pull?.landsAtMs ?? 0)) now = step(now);
    now = step(now);
    expect(full.numRunning).toBe(2);
    expect(full.numWaiting).toBe(1);
    expect(full.nextWakeMs()).toBeUndefined();
    const free = full.stats().kvBlocksFree;
    expect(full.abort("d")).toBe(true);
    expect(full.stats().kvBlocksFree).toBe(free + 7);
    drain(full, now);
    expect(full.stats()).toMatchObject({ kvBlocksFree: 100, kvUsage: 0, waiting: 0, running: 0, finished: 2 });
  });

  it("does not stall when a request preempted for want of blocks heads the queue while landed ones hold theirs", () => {
    // 30 blocks, 64-token steps: r1's and r2's pulls take what r0's second token needed; r0 is preempted and needs 8 blocks to come back.
    const model = new EngineModel({ profile: smallProfile(30), maxBatchedTokens: 64, priorityScheduling: false, kvPullMs: (t) => t / 20 });
    model.submit({ id: "r0", promptTokens: tokens(112, 0, "a"), maxTokens: 2, ignoreEos: true }, 0);
    model.submit({ id: "r1", promptTokens: tokens(49, 0, "b"), maxTokens: 1, remoteKv: {} }, 0);
    const first = model.startStep(0) ?? 0;
    model.finishStep();
    model.submit({ id: "r2", promptTokens: tokens(289, 0, "c"), maxTokens: 1, remoteKv: {} }, first);
    const { events } = drain(model, first, 1_000);
    expect(finishedOf(events, "r0").preemptions).toBe(1);
    expect(["r1", "r2"].map((id) => finishedOf(events, id).prefillTokens)).toEqual([1, 1]);
  });

  it("is recomputed here, not pulled again, when preempted later", () => {
    const model = engine((t) => t / 100);
    // x grows to 364 tokens (23 blocks) and d to 400 (25): together past 40 blocks; d, the later, is preempted.
    model.submit({ id: "x", promptTokens: tokens(64, 0, "x"), maxTokens: 300, ignoreEos: true }, 0);
    model.submit({ id: "d", promptTokens: tokens(200, 0, "d"), maxTokens: 200, ignoreEos: true, remoteKv: {} }, 0);
    const { events, pulls } = drain(model);
    const d = finishedOf(events, "d");
    expect(d.preemptions).toBeGreaterThan(0);
    expect(pulls).toHaveLength(1);
    // Recomputed here (what its own cache still held after the preemption excepted).
    expect(d.prefillTokens).toBeGreaterThan(16);
    expect(d.usage.completionTokens).toBe(200);
    expect(model.stats().remoteKvRecomputedTokens).toBe(d.prefillTokens - 1);
  });

  it("a reported pull waits for its report; short, it computes the rest; failed, the whole prompt", () => {
    const run = (arrived: number) => {
      const model = engine((t) => t / 10);
      model.submit({ id: "d", promptTokens: tokens(100), maxTokens: 2, ignoreEos: true, remoteKv: { reported: true } }, 0);
      expect(model.startStep(0)).toBeUndefined();
      const [pull] = model.takeKvPulls();
      expect(pull?.landsAtMs).toBe(10);
      // Not in until reported, whatever the clock says.
      expect(model.nextWakeMs()).toBeUndefined();
      expect(model.startStep(20)).toBeUndefined();
      expect(model.kvPullDone("d", arrived, 25)).toBe(true);
      expect(model.kvPullDone("d", arrived, 25)).toBe(false);
      expect(model.nextWakeMs()).toBe(10);
      const d = finishedOf(drain(model, 25).events, "d");
      return { d, stats: model.stats() };
    };
    // Whole blocks arrived (the partial last one is computed here).
    const whole = run(96);
    expect(whole.d.prefillTokens).toBe(4);
    expect(whole.d.usage.cachedTokens).toBe(96);
    expect(whole.stats.remoteKvShortPulls).toBe(0);
    const short = run(32);
    expect(short.d.prefillTokens).toBe(68);
    expect(short.stats).toMatchObject({ remoteKvShortPulls: 1, remoteKvPulledTokens: 32, remoteKvRecomputedTokens: 67 });
    const failed = run(0);
    expect(failed.d.prefillTokens).toBe(100);
    expect(failed.d.usage.cachedTokens).toBe(0);
    expect(failed.d.remoteKv?.pulledTokens).toBe(0);
    expect(failed.stats).toMatchObject({ remoteKvShortPulls: 1, kvUsage: 0 });
  });
});
