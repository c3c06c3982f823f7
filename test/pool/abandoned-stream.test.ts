import { afterEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { ChatCompletionChunk } from "../../src/protocol/chat.js";
import { eventData, SseEventSplitter } from "../../src/protocol/sse.js";
import { countTokens, renderPrompt } from "../../src/protocol/tokens.js";
import type { EngineKind } from "../../src/pool/engines/adapter.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, metricValue, operatorGet, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * A client that leaves mid-stream: the pool still records what the engine did for the
 * call (prompt and completion tokens so far), from the usage vLLM-like engines put on
 * every chunk when asked for continuous usage. Against the simulated vLLM engine in
 * real time, over real sockets.
 */

const cleanups: (() => Promise<void>)[] = [];
let infoLog: MockInstance<typeof console.info>;
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  vi.restoreAllMocks();
});

async function stack(kind: EngineKind): Promise<{ sim: SimEngineHandle; pool: PoolHandle }> {
  infoLog = vi.spyOn(console, "info").mockImplementation(() => undefined);
  // Real time: a token every few milliseconds, so the client can leave half-way.
  const sim = await startSimEngine({ timeScale: 1 });
  cleanups.push(() => sim.close());
  const pool = await startPool(testConfig({ engines: [{ id: "sim0", url: sim.url, kind }] }));
  cleanups.push(() => pool.close());
  return { sim, pool };
}

const messages = [{ role: "user" as const, content: "Write a long answer, token by token, until told to stop." }];
const tokensOf = async (pool: PoolHandle, kind: "prompt" | "completion") =>
  metricValue(await (await operatorGet(pool.url, "/metrics")).text(), `agentix_pool_engine_tokens_total{engine="sim0",kind="${kind}",outcome="aborted"}`);

/** Sends a long streaming call, reads `tokens` content chunks, then leaves. Returns the call ID and the chunks read. */
async function leaveAfter(pool: PoolHandle, tokens: number): Promise<{ callId: string; chunks: ChatCompletionChunk[] }> {
  const call = await signedCall({ body: chatBody({ model: DEFAULT_SIM_MODEL, messages, max_tokens: 4_000, ignore_eos: true, stream: true }) });
  const client = new AbortController();
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body, signal: client.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
  const chunks: ChatCompletionChunk[] = [];
  let content = 0;
  while (content < tokens) {
    const next = await reader.read();
    if (next.done) throw new Error("the stream ended before the client left");
    const chunk = ChatCompletionChunk.parse(JSON.parse(eventData(next.value) ?? ""));
    chunks.push(chunk);
    if (typeof (chunk.choices[0] as { delta?: { content?: unknown } } | undefined)?.delta?.content === "string" && chunks.length > 1) content += 1;
  }
  client.abort();
  await reader.cancel().catch(() => undefined);
  return { callId: call.fields.call, chunks };
}

describe("a client that leaves mid-stream", () => {
  it("vLLM kind: the pool records the engine's prompt and completion tokens so far, in the metrics and the log", async () => {
    const { sim, pool } = await stack("vllm");
    const { callId, chunks } = await leaveAfter(pool, 5);
    // The pool relays the engine's chunks unchanged: per-chunk usage included (the edge takes it out).
    const seen = chunks.at(-1)?.usage;
    expect(seen?.completion_tokens).toBe(5);
    const promptTokens = countTokens(renderPrompt({ messages }));
    expect(seen?.prompt_tokens).toBe(promptTokens);

    await waitFor(async () => (await tokensOf(pool, "completion")) !== undefined, "the aborted call's tokens on /metrics");
    await waitFor(() => sim.model.stats().running === 0, "the engine request aborted");
    expect(await tokensOf(pool, "prompt")).toBe(promptTokens);
    const completion = (await tokensOf(pool, "completion")) ?? 0;
    // At least what the client read; the engine stopped long before max_tokens.
    expect(completion).toBeGreaterThanOrEqual(5);
    expect(completion).toBeLessThan(4_000);
    const log = infoLog.mock.calls.map((args) => args.join(" ")).find((line) => line.includes(callId));
    expect(log).toContain("aborted on engine sim0");
    expect(log).toContain(`engine reported ${promptTokens} prompt + ${completion} completion tokens`);
  });

  it("(control) openai kind, not asked for continuous usage: no usage to record", async () => {
    const { pool } = await stack("openai");
    const { callId, chunks } = await leaveAfter(pool, 5);
    expect(chunks.every((chunk) => chunk.usage === undefined || chunk.usage === null)).toBe(true);
    await waitFor(() => infoLog.mock.calls.some((args) => args.join(" ").includes(callId)), "the aborted call's log line");
    expect(infoLog.mock.calls.map((args) => args.join(" ")).find((line) => line.includes(callId))).toContain("no usage reported");
    expect(await tokensOf(pool, "completion")).toBeUndefined();
  });
});
