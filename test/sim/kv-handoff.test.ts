import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { LLAMA_31_8B_H100 } from "../../src/sim/profiles.js";

/* The simulated engine's disaggregated serving (kv-handoff.ts): vLLM's kv_transfer_params between a prefill and a decode engine. */

let prefill: SimEngineHandle;
let decode: SimEngineHandle;
let expiring: SimEngineHandle;

beforeAll(async () => {
  [prefill, decode, expiring] = await Promise.all([
    startSimEngine({ engineId: "sim-prefill", timeScale: 1_000 }),
    startSimEngine({ engineId: "sim-decode", timeScale: 1_000 }),
    // Holds KV 1 s of model time: 1 ms of real time at this scale.
    startSimEngine({ engineId: "sim-expiring", timeScale: 1_000, kvHoldTimeoutMs: 1_000 }),
  ]);
});
afterAll(async () => {
  await Promise.all([prefill, decode, expiring].map((e) => e?.close()));
});

// ~300 tokens of prompt: whole blocks of 16 and a partial last one.
const PROMPT = Array.from({ length: 300 }, (_, i) => `word${i % 37}`).join(" ");

interface ChatAnswer {
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens: number } | null };
  kv_transfer_params?: Record<string, unknown>;
}

async function chatWith(engine: SimEngineHandle, content: string, extra: Record<string, unknown>): Promise<ChatAnswer> {
  const response = await fetch(`${engine.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content }], ...extra }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as ChatAnswer;
}

const chat = (engine: SimEngineHandle, extra: Record<string, unknown>) => chatWith(engine, PROMPT, extra);

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 2));
  expect(condition()).toBe(true);
}

const REMOTE_DECODE = { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null };

async function metric(engine: SimEngineHandle, series: string): Promise<number | undefined> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("simulated engine: kv_transfer_params", () => {
  it("prefills a remote-decode request, holds its blocks, and names them in its answer", async () => {
    const answer = await chat(prefill, { max_tokens: 1, kv_transfer_params: REMOTE_DECODE });
    const prompt = answer.usage.prompt_tokens;
    const params = answer.kv_transfer_params;
    expect(params).toMatchObject({ do_remote_prefill: true, do_remote_decode: false, remote_engine_id: "sim-prefill", remote_host: "127.0.0.1", remote_port: prefill.port });
    expect(params?.remote_block_ids).toHaveLength(Math.floor(prompt / 16));
    // Held: the finished request's blocks stay in use until a decode engine reads them.
    expect(prefill.model.kvUsage).toBeGreaterThan(0);

    const before = decode.model.stats();
    const decoded = await chat(decode, { max_tokens: 20, ignore_eos: true, kv_transfer_params: params });
    expect(decoded.usage.completion_tokens).toBe(20);
    // The decode engine pulled the whole blocks into blocks of its own and computed only past them (the partial last block).
    const after = decode.model.stats();
    const pulled = Math.min(Math.floor(prompt / 16) * 16, prompt - 1);
    expect(after.remoteKvPulledTokens - before.remoteKvPulledTokens).toBe(pulled);
    expect(after.remoteKvRecomputedTokens - before.remoteKvRecomputedTokens).toBe(prompt - 1 - pulled);
    expect(decoded.usage.prompt_tokens_details?.cached_tokens).toBe(pulled);
    expect(await metric(decode, `agentix:kv_remote_pulled_tokens_total{model_name="${DEFAULT_SIM_MODEL}",engine="0"}`)).toBe(pulled);
    // Read: the prefill engine let its blocks go.
    expect(prefill.model.kvUsage).toBe(0);
    expect(await metric(prefill, 'agentix_sim_kv_handoffs_total{side="prefill",outcome="read"}')).toBe(1);
    expect(await metric(decode, 'agentix_sim_kv_handoffs_total{side="decode",outcome="imported"}')).toBe(1);
  });

  it("recomputes a handoff whose blocks are gone (read already, or held past the timeout), and counts it", async () => {
    const fresh = await startSimEngine({ timeScale: 1_000 });
    try {
      const held = await chat(expiring, { max_tokens: 1, kv_transfer_params: REMOTE_DECODE });
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(expiring.model.kvUsage).toBe(0);
      expect(await metric(expiring, 'agentix_sim_kv_handoffs_total{side="prefill",outcome="expired"}')).toBe(1);
      const decoded = await chat(fresh, { max_tokens: 5, ignore_eos: true, kv_transfer_params: held.kv_transfer_params });
      expect(decoded.usage.completion_tokens).toBe(5);
      expect(decoded.usage.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
      expect(await metric(fresh, 'agentix_sim_kv_handoffs_total{side="decode",outcome="recomputed"}')).toBe(1);
      expect(fresh.model.stats()).toMatchObject({ remoteKvPulls: 1, remoteKvShortPulls: 1, remoteKvPulledTokens: 0, kvUsage: 0 });
    } finally {
      await fresh.close();
    }
  });

  it("a decode on a full decode engine waits for room, then pulls the KV (pinned on the prefill engine until then) instead of recomputing", async () => {
    // 64 blocks (1,024 tokens): a 676-token request (no prefix shared with PROMPT) growing by 300 leaves no room for PROMPT's 32 blocks until it ends.
    const full = await startSimEngine({ engineId: "sim-full", timeScale: 20, profile: { ...LLAMA_31_8B_H100, kvBlocks: 64, maxModelLen: 1_024 } });
    try {
      const handoff = await chat(prefill, { max_tokens: 1, kv_transfer_params: REMOTE_DECODE });
      const prompt = handoff.usage.prompt_tokens;
      const other = `${PROMPT.replaceAll("word", "wurd")} ${PROMPT.replaceAll("word", "ward")}`.split(" ").slice(0, 400).join(" ");
      const big = chatWith(full, other, { max_tokens: 300, ignore_eos: true });
      await waitFor(() => full.model.numRunning === 1);
      const decoded = chat(full, { max_tokens: 5, ignore_eos: true, kv_transfer_params: handoff.kv_transfer_params });
      await waitFor(() => full.model.numWaiting === 1);
      await new Promise((resolve) => setTimeout(resolve, 30));
      // Waiting for room: no pull started, nothing computed, the prefill engine still holds the KV.
      expect(full.model.stats()).toMatchObject({ remoteKvPulls: 0, waiting: 1, running: 1 });
      expect(prefill.model.kvUsage).toBeGreaterThan(0);
      const [bigAnswer, answer] = await Promise.all([big, decoded]);
      expect(bigAnswer.usage.completion_tokens).toBe(300);
      const pulled = Math.min(Math.floor(prompt / 16) * 16, prompt - 1);
      expect(answer.usage.prompt_tokens_details?.cached_tokens).toBe(pulled);
      expect(full.model.stats()).toMatchObject({ remoteKvPulls: 1, remoteKvPulledTokens: pulled, remoteKvRecomputedTokens: prompt - 1 - pulled, preemptions: 0 });
      expect(full.model.stats().remoteKvRoomWaitMs).toBeGreaterThan(0);
      expect(prefill.model.kvUsage).toBe(0);
    } finally {
      await full.close();
    }
  });

  it("ignores kv_transfer_params on a streamed request (vLLM returns them only in a whole answer)", async () => {
    const response = await fetch(`${prefill.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 1, stream: true, kv_transfer_params: REMOTE_DECODE }),
    });
    await response.text();
    expect(prefill.model.kvUsage).toBe(0);
  });
});
