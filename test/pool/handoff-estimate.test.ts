import { describe, expect, it } from "vitest";
import { PoolCore } from "../../src/core/pool-core.js";
import { DEFAULT_ADMISSION_SETTINGS, DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { DEFAULT_DECODE_STEP_MS, DEFAULT_HANDOFF_LINK, expectedHandoffMs, handoffFactsOf } from "../../src/pool/handoff-estimate.js";
import { KV_LINKS } from "../../src/sim/kv-links.js";
import { decodeCostOf, LLAMA_31_8B_H100 } from "../../src/sim/profiles.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "../core/calls.js";

/* A split call's expected time from hand-off to the decode's end: what the prefill engine's keep of its copy lasts (× the planner's factor). */

describe("expectedHandoffMs", () => {
  it("is the prompt's KV over the prefill engine's link plus one decode step per expected output token", () => {
    // 10,000 tokens × 128 KiB over NVLink's 450 GB/s: 2.9127 ms; 100 tokens at 7.5 ms: 750 ms.
    const ms = expectedHandoffMs({ promptTokens: 10_000, outputTokens: 100, link: KV_LINKS["llama-3.1-8b-h100"], decodeStepMs: 7.5 });
    expect(ms).toBeCloseTo(750 + (10_000 * 131_072) / 450e9 * 1_000, 9);
    expect(ms).toBeCloseTo(752.9127, 4);
  });

  it("takes the slow defaults for what the pool does not know: 320 KiB a token over 50 GB/s, 50 ms a token", () => {
    expect(DEFAULT_HANDOFF_LINK).toMatchObject({ kvBytesPerToken: 327_680, engineLinkGBps: 50 });
    expect(DEFAULT_DECODE_STEP_MS).toBe(50);
    // 10,000 tokens × 320 KiB at 50 GB/s: 65.536 ms; 100 tokens × 50 ms.
    expect(expectedHandoffMs({ promptTokens: 10_000, outputTokens: 100, link: undefined, decodeStepMs: undefined })).toBeCloseTo(5_065.536, 6);
    expect(expectedHandoffMs({ promptTokens: 0, outputTokens: 0, link: undefined, decodeStepMs: undefined })).toBe(0);
  });
});

describe("handoffFactsOf", () => {
  const settings = { ...DEFAULT_DISPATCH_SETTINGS, queue: TEST_QUEUE_SETTINGS };
  const core = () =>
    new PoolCore({
      settings,
      engines: [
        { id: "P", maxInFlight: 8, role: "prefill" },
        { id: "D", maxInFlight: 8, role: "decode", costModel: decodeCostOf(LLAMA_31_8B_H100) },
        { id: "D-bare", maxInFlight: 8, role: "decode" },
      ],
    });

  it("reads admission's expected output (capped by max_tokens) and the decode engine's projected step with the call in its batch", () => {
    const pool = core();
    const call = makeCall({ programId: "prog_handoff", promptTokens: 1_000, maxTokens: 20 });
    expect(pool.placeDecode(call, new Set(["D-bare"]))).toBe("D");
    const facts = handoffFactsOf(pool, call, "D", KV_LINKS["llama-3.1-8b-h100"]);
    // One sequence holding 1,000 + 20 tokens: the 7 ms floor + 0.076 µs × 1,020 + 4.4 µs.
    expect(facts).toMatchObject({ promptTokens: 1_000, outputTokens: 20, link: KV_LINKS["llama-3.1-8b-h100"] });
    expect(facts.decodeStepMs).toBeCloseTo(7 + 0.000_076 * 1_020 + 0.004_4, 9);
    // Without max_tokens, the pool's default expectation (256) before any call of the program ended.
    expect(handoffFactsOf(pool, makeCall({ programId: "prog_other", promptTokens: 1_000 }), "D", undefined).outputTokens).toBe(DEFAULT_ADMISSION_SETTINGS.defaultOutputTokens);
  });

  it("leaves the step to the default for a decode engine without a cost model, or one the pool does not know", () => {
    const pool = core();
    const call = makeCall({ programId: "prog_handoff", promptTokens: 1_000, maxTokens: 20 });
    expect(pool.placeDecode(call, new Set(["D"]))).toBe("D-bare");
    expect(handoffFactsOf(pool, call, "D-bare", undefined).decodeStepMs).toBeUndefined();
    expect(handoffFactsOf(pool, call, "gone", undefined).decodeStepMs).toBeUndefined();
  });
});
