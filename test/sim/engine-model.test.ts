import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EngineModel, EngineRequestError } from "../../src/sim/engine-model.js";
import { naturalOutputTokens, outputText, outputTokenText } from "../../src/sim/output-text.js";
import { LLAMA_31_70B_H100_TP4 } from "../../src/sim/profiles.js";
import { drain, finishedOf, smallProfile, tokens } from "./model-helpers.js";

// Reference figures (workloads-and-engines.md, Llama-3.1-8B on 1×H100), in ms.
const BASE = 7;
const PER_TOKEN = 0.029;
const ATTENTION = 1.18e-6;
const PER_CONTEXT = 0.076e-3;
const PER_SEQ = 4.4e-3;

describe("step timing", () => {
  it("times one short request: a prefill step, then decode steps, as the formula says", () => {
    const model = new EngineModel();
    model.submit({ id: "a", promptTokens: tokens(100), outputTokens: 3 }, 0);
    const { durations, events } = drain(model);
    // Prefill of T=100 after s=0 in a batch of B=1: the weight-read floor dominates.
    const prefill = Math.max(BASE, PER_TOKEN * (100 + 1)) + ATTENTION * 100 * (0 + 50) + PER_CONTEXT * 100 + PER_SEQ;
    // Each decode reads the whole context (101, then 102 tokens).
    const decode1 = BASE + PER_CONTEXT * 101 + PER_SEQ;
    const decode2 = BASE + PER_CONTEXT * 102 + PER_SEQ;
    expect(durations).toHaveLength(3);
    expect(durations[0]).toBeCloseTo(prefill, 9);
    expect(durations[1]).toBeCloseTo(decode1, 9);
    expect(durations[2]).toBeCloseTo(decode2, 9);
    const done = finishedOf(events, "a");
    expect(done.timing.ttftMs).toBeCloseTo(prefill, 9);
    expect(done.timing.e2eMs).toBeCloseTo(prefill + decode1 + decode2, 9);
    expect(done.timing.tpotMs).toBeCloseTo((decode1 + decode2) / 2, 9);
    expect(done.usage).toEqual({ promptTokens: 100, cachedTokens: 0, completionTokens: 3 });
  });

  it("chunks a long prompt by the 2,048-token budget; the linear term and attention then count", () => {
    const model = new EngineModel();
    model.submit({ id: "long", promptTokens: tokens(3_000), outputTokens: 1 }, 10);
    const { durations, events } = drain(model, 10);
    const chunk1 = Math.max(BASE, PER_TOKEN * (2_048 + 1)) + ATTENTION * 2_048 * (0 + 1_024) + PER_CONTEXT * 2_048 + PER_SEQ;
    const chunk2 = Math.max(BASE, PER_TOKEN * (952 + 1)) + ATTENTION * 952 * (2_048 + 476) + PER_CONTEXT * 3_000 + PER_SEQ;
    expect(durations).toHaveLength(2);
    expect(durations[0]).toBeCloseTo(chunk1, 9);
    expect(durations[1]).toBeCloseTo(chunk2, 9);
    const done = finishedOf(events, "long");
    expect(done.timing.ttftMs).toBeCloseTo(chunk1 + chunk2, 9);
    expect(done.timing.tpotMs).toBeUndefined();
    expect(done.timing.arrivalMs).toBe(10);
  });

  it("the A100 profile: the H100 figures scaled by published peaks (bf16 312 vs 989 TFLOPS, 2,039 vs 3,350 GB/s)", () => {
    const model = new EngineModel({ profile: "llama-3.1-8b-a100" });
    model.submit({ id: "a", promptTokens: tokens(3_000), outputTokens: 2 }, 0);
    const { durations } = drain(model);
    const compute = 989 / 312;
    const bandwidth = 3_350 / 2_039;
    // Prefill chunk of 2,048: compute-bound, so the linear rate and attention scale by the compute ratio.
    const chunk1 = Math.max(BASE * bandwidth, PER_TOKEN * compute * (2_048 + 1)) + ATTENTION * compute * 2_048 * 1_024 + PER_CONTEXT * bandwidth * 2_048 + PER_SEQ;
    expect(durations[0]).toBeCloseTo(chunk1, 9);
    // A decode step reads the weights and the context: the bandwidth ratio (11.5 ms floor).
    expect(durations[2]).toBeCloseTo(BASE * bandwidth + PER_CONTEXT * bandwidth * 3_001 + PER_SEQ, 9);
    expect(BASE * bandwidth).toBeCloseTo(11.5, 1);
    // Same 80 GB card and model as the H100 row: the same KV capacity.
    expect(model.profile.kvBlocks * model.profile.blockSize).toBe(420_800);
  });

  it("uses the 70B profile's own figures", () => {
    const model = new EngineModel({ profile: "llama-3.1-70b-h100-tp4" });
    model.submit({ id: "a", promptTokens: tokens(500), outputTokens: 1 }, 0);
    const { durations } = drain(model);
    const p = LLAMA_31_70B_H100_TP4;
    expect(durations[0]).toBeCloseTo(
      Math.max(18.5, 0.086 * 501) + 1.47e-6 * 500 * 250 + 0.048e-3 * 500 + 4.4e-3,
      9,
    );
    expect(p.kvBlocks * p.blockSize).toBe(488_000);
  });
});

describe("prefix cache", () => {
  it("serves whole shared blocks of a later request's prompt from the cache", () => {
    const model = new EngineModel();
    model.submit({ id: "a", promptTokens: tokens(100), outputTokens: 2 }, 0);
    const first = drain(model);
    expect(finishedOf(first.events, "a").usage.cachedTokens).toBe(0);

    // Shares 90 tokens: 5 whole blocks (80 tokens) are reusable, the 6th differs.
    const shared = [...tokens(90), ...tokens(40, 500)];
    model.submit({ id: "b", promptTokens: shared, outputTokens: 2 }, first.endMs);
    const second = drain(model, first.endMs);
    expect(finishedOf(second.events, "b").usage).toEqual({ promptTokens: 130, cachedTokens: 80, completionTokens: 2 });

    const stats = model.stats();
    expect(stats.prefixCacheQueries).toBe(100 + 130);
    expect(stats.prefixCacheHits).toBe(80);
  });

  it("recomputes the last block of a fully cached prompt (one token must produce logits)", () => {
    const model = new EngineModel();
    model.submit({ id: "a", promptTokens: tokens(96), outputTokens: 1 }, 0);
    const { endMs } = drain(model);
    model.submit({ id: "again", promptTokens: tokens(96), outputTokens: 1 }, endMs);
    const { events, durations } = drain(model, endMs);
    expect(finishedOf(events, "again").usage.cachedTokens).toBe(80);
    // Only the last block is prefilled, after 80 cached tokens.
    expect(durations[0]).toBeCloseTo(BASE + ATTENTION * 16 * (80 + 8) + PER_CONTEXT * 96 + PER_SEQ, 9);
  });

  it("lets a request hit blocks another running request has just prefilled", () => {
    const model = new EngineModel();
    model.submit({ id: "a", promptTokens: tokens(64), outputTokens: 5 }, 0);
    const d = model.startStep(0) ?? 0;
    model.finishStep();
    model.submit({ id: "b", promptTokens: [...tokens(64), ...tokens(8, 900)], outputTokens: 1 }, d);
    const { events } = drain(model, d);
    expect(finishedOf(events, "b").usage.cachedTokens).toBe(64);
  });

  it("evicts the least recently freed unreferenced blocks first", () => {
    // 8 blocks: two 4-block prompts fill the cache, then a third evicts the older one.
    const model = new EngineModel({ profile: smallProfile(8) });
    const old = tokens(64);
    const recent = tokens(64, 5_000, "f");
    let t = 0;
    for (const [id, prompt] of [["old", old], ["recent", recent], ["other", tokens(64, 9_000, "g")]] as const) {
      model.submit({ id, promptTokens: prompt, outputTokens: 1 }, t);
      t = drain(model, t).endMs;
    }
    model.submit({ id: "recent-again", promptTokens: recent, outputTokens: 1 }, t);
    const first = drain(model, t);
    expect(finishedOf(first.events, "recent-again").usage.cachedTokens).toBe(48);
    model.submit({ id: "old-again", promptTokens: old, outputTokens: 1 }, first.endMs);
    const second = drain(model, first.endMs);
    expect(finishedOf(second.events, "old-again").usage.cachedTokens).toBe(0);
  });
});

describe("KV exhaustion", () => {
  it("preempts the latest request by recompute and still finishes every request with correct usage", () => {
    // 26 blocks = 416 tokens; three requests growing to 64 + 120 tokens each (12 blocks) cannot coexist.
    const model = new EngineModel({ profile: smallProfile(26) });
    for (const id of ["r1", "r2", "r3"]) {
      model.submit({ id, promptTokens: tokens(64, id.charCodeAt(1) * 100), maxTokens: 120, ignoreEos: true }, 0);
    }
    const { events } = drain(model);
    const preempted = events.filter((e) => e.type === "preempted").map((e) => e.requestId);
    expect(preempted.length).toBeGreaterThan(0);
    expect(preempted[0]).toBe("r3");
    for (const id of ["r1", "r2", "r3"]) {
      const done = finishedOf(events, id);
      expect(done.usage).toEqual({ promptTokens: 64, cachedTokens: 0, completionTokens: 120 });
      expect(done.finishReason).toBe("length");
    }
    const stats = model.stats();
    expect(stats.preemptions).toBe(preempted.length);
    expect(finishedOf(events, "r3").preemptions).toBeGreaterThan(0);
    // The re-prefill found (part of) the preempted request's own blocks still cached.
    expect(stats.prefixCacheHits).toBeGreaterThan(0);
    expect(stats).toMatchObject({ running: 0, waiting: 0, kvUsage: 0, finished: 3 });
  });

  it("preempts the lowest-priority request (highest value) under priority scheduling, FCFS the latest", () => {
    const firstVictim = (priorityScheduling: boolean) => {
      const model = new EngineModel({ profile: smallProfile(26), priorityScheduling });
      const priorities = { r1: 5, r2: 0, r3: 0 };
      for (const [id, priority] of Object.entries(priorities)) {
        model.submit({ id, promptTokens: tokens(64, id.charCodeAt(1) * 100), maxTokens: 120, ignoreEos: true, priority: priorityScheduling ? priority : 0 }, 0);
      }
      return drain(model).events.find((e) => e.type === "preempted")?.requestId;
    };
    expect(firstVictim(true)).toBe("r1");
    expect(firstVictim(false)).toBe("r3");
  });

  it("emits each token index exactly once across a preemption", () => {
    const model = new EngineModel({ profile: smallProfile(26) });
    for (const id of ["r1", "r2", "r3"]) {
      model.submit({ id, promptTokens: tokens(64, id.charCodeAt(1) * 100), maxTokens: 120, ignoreEos: true }, 0);
    }
    const { emitted } = drain(model);
    for (const id of ["r1", "r2", "r3"]) expect(emitted.get(id)).toEqual(Array.from({ length: 120 }, (_, i) => i));
  });
});

describe("scheduling order", () => {
  function admissionOrder(priorityScheduling: boolean): string[] {
    const model = new EngineModel({ maxNumSeqs: 1, priorityScheduling });
    model.submit({ id: "running", promptTokens: tokens(20), outputTokens: 4, priority: 10 }, 0);
    let now = model.startStep(0) ?? 0;
    model.finishStep();
    // Arrive while the batch is full; none displaces the running request.
    model.submit({ id: "p10", promptTokens: tokens(20, 100), outputTokens: 2, priority: 10 }, now);
    model.submit({ id: "p1", promptTokens: tokens(20, 200), outputTokens: 2, priority: 1 }, now + 1);
    model.submit({ id: "p5", promptTokens: tokens(20, 300), outputTokens: 2, priority: 5 }, now + 2);
    model.submit({ id: "p1-later", promptTokens: tokens(20, 400), outputTokens: 2, priority: 1 }, now + 3);
    now += 3;
    const { events } = drain(model, now);
    return events.filter((e) => e.type === "finished").map((e) => e.requestId);
  }

  it("runs lower priority values first, then by arrival, when the batch is full", () => {
    expect(admissionOrder(true)).toEqual(["running", "p1", "p1-later", "p5", "p10"]);
  });

  it("is first-come first-served without priority scheduling", () => {
    expect(admissionOrder(false)).toEqual(["running", "p10", "p1", "p5", "p1-later"]);
  });

  it("respects the per-step token budget and sequence cap", () => {
    const model = new EngineModel({ maxNumSeqs: 2, maxBatchedTokens: 100 });
    for (let i = 0; i < 3; i++) model.submit({ id: `r${i}`, promptTokens: tokens(80, i * 1000), outputTokens: 2 }, 0);
    model.startStep(0);
    // r0 gets 80 tokens, r1 the remaining 20 of the budget; r2 waits (and the cap is 2 anyway).
    expect(model.stats()).toMatchObject({ running: 2, waiting: 1 });
    model.finishStep();
  });
});

describe("generated output", () => {
  it("is the same for the same prompt and stops at a prompt-derived length in 16..300", () => {
    const run = () => {
      const model = new EngineModel();
      const submitted = model.submit({ id: "x", promptTokens: tokens(40, 7) }, 0);
      const { events } = drain(model);
      return { submitted, usage: finishedOf(events, "x").usage, text: outputText(submitted.seed, submitted.completionTokens) };
    };
    const a = run();
    const b = run();
    expect(a).toEqual(b);
    expect(a.usage.completionTokens).toBe(naturalOutputTokens(a.submitted.seed));
    expect(a.usage.completionTokens).toBeGreaterThanOrEqual(16);
    expect(a.usage.completionTokens).toBeLessThanOrEqual(300);
    expect(a.submitted.finishReason).toBe("stop");
    expect(a.text.split(" ")).toHaveLength(a.usage.completionTokens);
    expect(outputTokenText(a.submitted.seed, 1).startsWith(" ")).toBe(true);
  });

  it("differs between prompts", () => {
    const model = new EngineModel();
    const seeds = new Set<number>();
    for (let i = 0; i < 20; i++) seeds.add(model.submit({ id: `p${i}`, promptTokens: tokens(30, i * 50) }, 0).seed);
    expect(seeds.size).toBe(20);
  });

  it("honours max_tokens, min_tokens and ignore_eos", () => {
    const model = new EngineModel();
    const prompt = tokens(40, 7);
    const natural = model.submit({ id: "n", promptTokens: prompt }, 0).completionTokens;
    const capped = model.submit({ id: "cap", promptTokens: prompt, maxTokens: 5 }, 0);
    expect(capped).toMatchObject({ completionTokens: 5, finishReason: "length" });
    const atLeast = model.submit({ id: "min", promptTokens: prompt, minTokens: natural + 7, maxTokens: 1_000 }, 0);
    expect(atLeast).toMatchObject({ completionTokens: natural + 7, finishReason: "stop" });
    const exact = model.submit({ id: "eos", promptTokens: prompt, maxTokens: 700, ignoreEos: true }, 0);
    expect(exact).toMatchObject({ completionTokens: 700, finishReason: "length" });
    const { events } = drain(model);
    expect(finishedOf(events, "eos").usage.completionTokens).toBe(700);
    expect(finishedOf(events, "min").usage.completionTokens).toBe(natural + 7);
  });
});

describe("requests the engine refuses or drops", () => {
  it("rejects like vLLM: context overflow, min > max, empty prompt, duplicate id", () => {
    const model = new EngineModel({ profile: smallProfile(8) }); // maxModelLen 128
    expect(() => model.submit({ id: "a", promptTokens: tokens(128) }, 0)).toThrow(/maximum context length is 128/);
    expect(() => model.submit({ id: "b", promptTokens: tokens(100), maxTokens: 29 }, 0)).toThrow(EngineRequestError);
    expect(() => model.submit({ id: "c", promptTokens: tokens(10), maxTokens: 5, minTokens: 6 }, 0)).toThrow(/min_tokens/);
    expect(() => model.submit({ id: "d", promptTokens: [] }, 0)).toThrow(/empty/);
    model.submit({ id: "e", promptTokens: tokens(10) }, 0);
    expect(() => model.submit({ id: "e", promptTokens: tokens(10) }, 0)).toThrow(/duplicate/);
    // Nothing above corrupted the state: only "e" is queued.
    expect(model.stats()).toMatchObject({ waiting: 1, running: 0 });
  });

  it("frees a running request's KV blocks on abort, mid-step included", () => {
    const model = new EngineModel();
    model.submit({ id: "a", promptTokens: tokens(300), maxTokens: 50, ignoreEos: true }, 0);
    model.submit({ id: "w", promptTokens: tokens(300, 2_000), maxTokens: 50 }, 0);
    model.startStep(0);
    expect(model.kvUsage).toBeGreaterThan(0);
    expect(model.abort("a")).toBe(true);
    expect(model.abort("w")).toBe(true);
    const events = model.finishStep();
    expect(events).toEqual([]);
    expect(model.stats()).toMatchObject({ running: 0, waiting: 0, kvUsage: 0, aborted: 2 });
    expect(model.startStep(1)).toBeUndefined();
    expect(model.abort("a")).toBe(false);
  });
});

describe("invariants under random load", () => {
  it("finishes every request with its planned usage and returns all KV blocks", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            prompt: fc.integer({ min: 1, max: 300 }),
            shareFrom: fc.integer({ min: 0, max: 3 }),
            out: fc.integer({ min: 1, max: 120 }),
            priority: fc.integer({ min: 0, max: 3 }),
            at: fc.integer({ min: 0, max: 400 }),
            abortAfter: fc.option(fc.integer({ min: 0, max: 30 }), { freq: 5 }),
            // A disaggregated decode: its KV pulled by the engine's clock, or reported by the caller with this many tokens.
            remote: fc.oneof(fc.constant("none" as const), fc.constant("timed" as const), fc.integer({ min: 0, max: 320 })),
          }),
          { minLength: 1, maxLength: 25 },
        ),
        fc.boolean(),
        (specs, priorityScheduling) => {
          const model = new EngineModel({ profile: smallProfile(30), maxBatchedTokens: 64, maxNumSeqs: 6, priorityScheduling, kvPullMs: (t) => t / 20 });
          const reports = new Map<string, number>();
          const pending = specs.map((s, i) => ({ ...s, id: `r${i}` })).sort((a, b) => a.at - b.at);
          const planned = new Map<string, number>();
          const aborts = new Map<string, number>();
          const finished = new Map<string, number>();
          let now = 0;
          let steps = 0;
          while (pending.length > 0 || !model.isIdle) {
            while (pending.length > 0 && (pending[0]?.at ?? 0) <= now) {
              const s = pending.shift();
              if (!s) break;
              const promptTokens = [...tokens(s.shareFrom * 16), ...tokens(s.prompt, 10_000 + s.at * 7, "u")];
              const remoteKv = s.remote === "none" ? {} : { remoteKv: { reported: s.remote !== "timed" } };
              if (typeof s.remote === "number") reports.set(s.id, s.remote);
              const sub = model.submit({ id: s.id, promptTokens, outputTokens: s.out, priority: s.priority, maxTokens: 120, ...remoteKv }, now);
              planned.set(s.id, sub.completionTokens);
              if (s.abortAfter !== null) aborts.set(s.id, steps + s.abortAfter);
            }
            for (const [id, at] of aborts) if (at <= steps && model.abort(id)) planned.delete(id);
            const d = model.startStep(now);
            for (const pull of model.takeKvPulls()) {
              const arrived = reports.get(pull.requestId);
              if (arrived !== undefined) model.kvPullDone(pull.requestId, arrived, now);
            }
            if (d === undefined) {
              const wake = model.nextWakeMs();
              const next = Math.min(pending[0]?.at ?? Number.POSITIVE_INFINITY, wake ?? Number.POSITIVE_INFINITY);
              if (Number.isFinite(next)) now = Math.max(now, next);
              else if (!model.isIdle) throw new Error("stuck: work left and nothing to wake for");
              continue;
            }
            now += d;
            steps++;
            for (const e of model.finishStep()) if (e.type === "finished") finished.set(e.requestId, e.usage.completionTokens);
          }
          expect(finished).toEqual(planned);
          expect(model.stats()).toMatchObject({ running: 0, waiting: 0, kvUsage: 0 });
        },
      ),
      { numRuns: 150 },
    );
  });
});
