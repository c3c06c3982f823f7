import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, metricValue, operatorGet, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * One disaggregated call end to end through the pool (issue 13): a simulated vLLM
 * prefill engine and a simulated decode engine, the call streamed to the client.
 */

let prefill: SimEngineHandle;
let decode: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  [prefill, decode] = await Promise.all([startSimEngine({ engineId: "sim-p", timeScale: 1_000 }), startSimEngine({ engineId: "sim-d", timeScale: 1_000 })]);
  pool = await startPool(
    testConfig({
      engines: [
        { id: "p", url: prefill.url, role: "prefill" },
        { id: "d", url: decode.url, role: "decode" },
      ],
    }),
  );
});
afterAll(async () => {
  await pool?.close();
  await Promise.all([prefill, decode].map((e) => e?.close()));
});

const PROMPT = Array.from({ length: 400 }, (_, i) => `token${i % 53}`).join(" ");

describe("a disaggregated call through the pool, on simulated engines", () => {
  it("prefills on the prefill engine, decodes on the decode engine from the handed-off KV, and streams the whole answer, billed once", async () => {
    const body = chatBody({ model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 40, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    const call = await signedCall({ body });
    const response = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });
    expect(response.status).toBe(200);
    const events: string[] = [];
    const reader = response.body!.pipeThrough(new SseEventSplitter()).getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) events.push(next.value);

    const chunks = events.filter((e) => !isDoneEvent(e) && !e.startsWith(":")).map((e) => JSON.parse(eventData(e) ?? "{}") as { choices?: { delta?: { content?: string } }[]; usage?: Record<string, unknown> | null });
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    // The whole answer: 40 tokens of text, then [DONE].
    expect(text.trim().split(/\s+/)).toHaveLength(40);
    expect(events.some((e) => isDoneEvent(e))).toBe(true);
    const usages = chunks.map((c) => c.usage).filter((u): u is Record<string, unknown> => u !== undefined && u !== null && (c0(u) > 0));
    const final = usages.at(-1) as { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } };
    expect(final.completion_tokens).toBe(40);
    // Billed as the prefill engine ran the prompt (nothing cached there), not as the decode engine saw it (imported KV).
    expect(final.prompt_tokens_details?.cached_tokens).toBe(0);
    const promptTokens = final.prompt_tokens;
    // The whole blocks the prefill engine held, short of the last token, which is always computed (its logits).
    const wholeBlocks = Math.min(Math.floor(promptTokens / 16) * 16, promptTokens - 1);

    // The prefill engine computed the prompt and made one token; the decode engine pulled the whole blocks from it
    // into blocks of its own and computed only the last partial block, then the 40 tokens.
    expect(prefill.model.stats().generationTokens).toBe(1);
    expect(prefill.model.stats().prefixCacheHits).toBe(0);
    expect(decode.model.stats()).toMatchObject({ remoteKvPulls: 1, remoteKvPulledTokens: wholeBlocks, prefixCacheHits: 0 });
    expect(decode.model.stats().generationTokens).toBe(40);
    expect(prefill.model.kvUsage).toBe(0);

    // The pool counted the prompt once (on the prefill engine) and the output once (on the decode engine).
    await waitFor(() => pool.dispatcher.runningCount === 0, "the call left the pool");
    const metrics = await (await operatorGet(pool.url, "/metrics")).text();
    expect(metricValue(metrics, 'agentix_pool_engine_tokens_total{engine="p",kind="prompt",outcome="completed"}')).toBe(promptTokens);
    expect(metricValue(metrics, 'agentix_pool_engine_tokens_total{engine="d",kind="completion",outcome="completed"}')).toBe(40);
    expect(metricValue(metrics, 'agentix_pool_engine_tokens_total{engine="d",kind="prompt",outcome="completed"}')).toBeUndefined();
    expect(metricValue(metrics, 'agentix_pool_split_handoffs_total{outcome="handed_off"}')).toBe(1);
  });
});

/** Completion tokens of a usage object (the edge's final usage chunk has them; continuous-usage chunks too, growing). */
function c0(usage: Record<string, unknown>): number {
  return typeof usage.completion_tokens === "number" ? usage.completion_tokens : 0;
}
