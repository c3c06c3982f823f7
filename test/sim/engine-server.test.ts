import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatCompletion, ChatCompletionChunk } from "../../src/protocol/chat.js";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { countTokens, renderPrompt } from "../../src/protocol/tokens.js";
import { type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";

const MODEL = "sim-llama-3.1-8b";

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

function post(engine: SimEngineHandle, path: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${engine.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

async function sseEvents(res: Response): Promise<string[]> {
  const events: string[] = [];
  const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new SseEventSplitter()).getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return events;
    events.push(value);
  }
}

async function metricValue(engine: SimEngineHandle, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${engine.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(" ") + 1));
}

const messages = [
  { role: "system" as const, content: "You are a careful coding agent. ".repeat(20) },
  { role: "user" as const, content: "List the files in the repository and explain the build." },
];
const promptTokens = countTokens(renderPrompt({ messages }));

describe("simulated engine over HTTP", () => {
  let fast: SimEngineHandle;
  let slow: SimEngineHandle;
  let openai: OpenAI;

  beforeAll(async () => {
    fast = await startSimEngine({ timeScale: 1_000 });
    slow = await startSimEngine({ timeScale: 1 });
    openai = new OpenAI({ baseURL: `${fast.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await fast?.close();
    await slow?.close();
  });

  it("answers /health and /v1/models", async () => {
    expect((await fetch(`${fast.url}/health`)).status).toBe(200);
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    expect(fast.port).toBeGreaterThan(0);
    expect(fast.engineId).toBe(`sim-${fast.port}`);
  });

  it("returns usage with cached tokens through the official OpenAI client", async () => {
    const first = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 7 });
    expect(ChatCompletion.safeParse(first).success).toBe(true);
    expect(first.choices[0]?.finish_reason).toBe("length");
    expect(first.choices[0]?.message.content?.split(" ")).toHaveLength(7);
    expect(first.usage).toMatchObject({
      prompt_tokens: promptTokens,
      completion_tokens: 7,
      total_tokens: promptTokens + 7,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    // Same prompt again: every whole block but the last one to compute comes from the cache.
    const second = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 7 });
    expect(second.usage?.prompt_tokens_details?.cached_tokens).toBe(Math.floor((promptTokens - 1) / 16) * 16);
    expect(second.choices[0]?.message.content).toBe(first.choices[0]?.message.content);
  });

  it("streams a role chunk, one chunk per token, a finish chunk, a usage chunk and [DONE]", async () => {
    const res = await post(fast, "/v1/chat/completions", {
      model: MODEL,
      messages: [{ role: "user", content: "stream me something short" }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const events = await sseEvents(res);
    expect(events).toHaveLength(1 + 5 + 1 + 1 + 1);
    expect(isDoneEvent(events[events.length - 1] ?? "")).toBe(true);
    const chunks = events.slice(0, -1).map((e) => ChatCompletionChunk.parse(JSON.parse(eventData(e) ?? "")));
    const deltas = chunks.map((c) => (c.choices[0] as { delta?: Record<string, unknown> } | undefined)?.delta);
    expect(deltas[0]).toEqual({ role: "assistant", content: "" });
    for (const delta of deltas.slice(1, 6)) expect(typeof delta?.content).toBe("string");
    expect(chunks[6]?.choices[0]).toMatchObject({ delta: {}, finish_reason: "length" });
    expect(chunks[7]?.choices).toEqual([]);
    expect(chunks[7]?.usage).toMatchObject({ completion_tokens: 5, prompt_tokens: countTokens(renderPrompt({ messages: [{ role: "user", content: "stream me something short" }] })) });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it("streams through the OpenAI client with the same text as the non-streaming answer", async () => {
    const whole = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: 12 });
    const stream = await openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]?.message.content);
    expect(usage?.completion_tokens).toBe(12);
  });

  it("omits the usage chunk when include_usage is not asked for", async () => {
    const res = await post(fast, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 2, stream: true });
    const events = await sseEvents(res);
    expect(events.map((e) => eventData(e)).filter((d) => d?.includes('"usage"'))).toEqual([]);
    expect(events).toHaveLength(1 + 2 + 1 + 1);
  });

  it("honours continuous_usage_stats as vLLM does: the usage so far on every chunk, with include_usage only", async () => {
    const prompt = [{ role: "user" as const, content: "count the tokens as you go" }];
    const promptCount = countTokens(renderPrompt({ messages: prompt }));
    const res = await post(fast, "/v1/chat/completions", {
      model: MODEL,
      messages: prompt,
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
    });
    const events = await sseEvents(res);
    expect(isDoneEvent(events.at(-1) ?? "")).toBe(true);
    const chunks = events.slice(0, -1).map((e) => ChatCompletionChunk.parse(JSON.parse(eventData(e) ?? "")));
    // Role chunk, 4 token chunks, the finish chunk, then the usage chunk.
    expect(chunks).toHaveLength(1 + 4 + 1 + 1);
    expect(chunks.slice(0, 6).map((c) => c.usage)).toEqual(
      [0, 1, 2, 3, 4, 4].map((completion) => ({ prompt_tokens: promptCount, completion_tokens: completion, total_tokens: promptCount + completion })),
    );
    expect(chunks[6]?.choices).toEqual([]);
    expect(chunks[6]?.usage).toMatchObject({ prompt_tokens: promptCount, completion_tokens: 4, prompt_tokens_details: { cached_tokens: expect.any(Number) } });

    // Without include_usage vLLM ignores it: no usage anywhere.
    const without = await sseEvents(
      await post(fast, "/v1/chat/completions", { model: MODEL, messages: prompt, max_tokens: 2, stream: true, stream_options: { continuous_usage_stats: true } }),
    );
    expect(without.filter((e) => e.includes('"usage"'))).toEqual([]);

    // Legacy completions too.
    const legacy = await sseEvents(
      await post(fast, "/v1/completions", {
        model: MODEL,
        prompt: "Once upon a time",
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true, continuous_usage_stats: true },
      }),
    );
    const legacyUsage = legacy.slice(0, -1).map((e) => (JSON.parse(eventData(e) ?? "") as { usage?: { completion_tokens: number } }).usage?.completion_tokens);
    expect(legacyUsage).toEqual([1, 2, 3, 3, 3]);
  });

  it("serves legacy /v1/completions with vLLM's default of 16 tokens", async () => {
    const res = await post(fast, "/v1/completions", { model: MODEL, prompt: "Once upon a time", ignore_eos: true });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; choices: { text: string }[]; usage: { prompt_tokens: number; completion_tokens: number } };
    expect(body.object).toBe("text_completion");
    expect(body.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 16 });
    expect(body.choices[0]?.text.split(" ")).toHaveLength(16);
  });

  it("answers bad requests with 400 in OpenAI's error shape", async () => {
    const cases: [unknown, string | null][] = [
      ["{not json", null],
      [{ model: MODEL }, "messages"],
      [{ model: MODEL, messages: [] }, "messages"],
      [{ model: MODEL, messages, temperature: 7 }, "temperature"],
      [{ model: MODEL, messages, priority: "high" }, "priority"],
      [{ model: MODEL, messages, max_tokens: 10, min_tokens: 11 }, "min_tokens"],
      [{ model: MODEL, messages: [{ role: "user", content: "x".repeat(600_000) }] }, "messages"],
    ];
    for (const [body, param] of cases) {
      const res = await post(fast, "/v1/chat/completions", body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      const error = OpenAIErrorBody.parse(await res.json());
      expect(error.error.type).toBe("invalid_request_error");
      expect(error.error.param).toBe(param);
    }
    const unknown = await post(fast, "/v1/chat/completions", { model: "gpt-4o", messages });
    expect(unknown.status).toBe(404);
    expect(OpenAIErrorBody.parse(await unknown.json()).error.code).toBe("model_not_found");
    expect(fast.model.stats()).toMatchObject({ running: 0, waiting: 0 });
  });

  it("exposes vLLM's metric names on /metrics, per engine", async () => {
    const text = await (await fetch(`${fast.url}/metrics`)).text();
    for (const name of [
      "vllm:num_requests_running",
      "vllm:num_requests_waiting",
      "vllm:kv_cache_usage_perc",
      "vllm:prefix_cache_queries_total",
      "vllm:prefix_cache_hits_total",
      "vllm:num_preemptions_total",
      "vllm:time_to_first_token_seconds_bucket",
      "vllm:time_per_output_token_seconds_bucket",
      "vllm:e2e_request_latency_seconds_bucket",
    ]) {
      expect(text).toMatch(new RegExp(`^${name}\\{[^}]*model_name="${MODEL}"`, "m"));
    }
    expect(await metricValue(fast, "vllm:prefix_cache_hits_total")).toBeGreaterThan(0);
    // The slow engine has its own registry: nothing served there yet.
    expect(await metricValue(slow, "vllm:generation_tokens_total")).toBe(0);
  });

  it("aborts a request whose client disconnects mid-stream and frees its KV blocks", async () => {
    const controller = new AbortController();
    const res = await post(
      slow,
      "/v1/chat/completions",
      { model: MODEL, messages, max_tokens: 5_000, ignore_eos: true, stream: true },
      { signal: controller.signal },
    );
    const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new SseEventSplitter()).getReader();
    for (let i = 0; i < 3; i++) await reader.read();
    expect(await metricValue(slow, "vllm:num_requests_running")).toBe(1);
    expect(slow.model.kvUsage).toBeGreaterThan(0);
    controller.abort();
    await waitFor(() => slow.model.numRunning === 0);
    expect(await metricValue(slow, "vllm:num_requests_running")).toBe(0);
    expect(slow.model.stats()).toMatchObject({ kvUsage: 0, aborted: 1, finished: 0 });
  });

  it("aborts a non-streaming request whose client goes away", async () => {
    const controller = new AbortController();
    const pending = post(slow, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 5_000, ignore_eos: true }, {
      signal: controller.signal,
    }).catch((err: unknown) => err);
    await waitFor(() => slow.model.numRunning === 1);
    controller.abort();
    await pending;
    await waitFor(() => slow.model.numRunning === 0);
    expect(slow.model.stats()).toMatchObject({ kvUsage: 0, aborted: 2 });
  });

  it("fails the next requests on demand: a dropped connection, then a 500, then serves again", async () => {
    fast.failNext(1);
    fast.failNext(1, "http-500");
    const body = { model: MODEL, messages, max_tokens: 3 };
    await expect(post(fast, "/v1/chat/completions", body)).rejects.toThrow();
    const failed = await post(fast, "/v1/chat/completions", body);
    expect(failed.status).toBe(500);
    expect(OpenAIErrorBody.parse(await failed.json()).error.type).toBe("server_error");
    expect((await post(fast, "/v1/chat/completions", body)).status).toBe(200);
  });

  it("lets the OpenAI client's retries ride over injected failures", async () => {
    const retrying = new OpenAI({ baseURL: `${fast.url}/v1`, apiKey: "unused", maxRetries: 2 });
    fast.failNext(1, "disconnect");
    fast.failNext(1, "http-500");
    const answer = await retrying.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    expect(answer.usage?.completion_tokens).toBe(2);
  });
});

describe("simulated engine options", () => {
  it("rejects a priority when priority scheduling is off, like vLLM", async () => {
    const engine = await startSimEngine({ timeScale: 1_000, priorityScheduling: false, model: "fcfs-model" });
    try {
      const res = await post(engine, "/v1/chat/completions", { model: "fcfs-model", messages, priority: 3 });
      expect(res.status).toBe(400);
      expect(OpenAIErrorBody.parse(await res.json()).error.param).toBe("priority");
      const ok = await post(engine, "/v1/chat/completions", { model: "fcfs-model", messages, max_tokens: 1, priority: 0 });
      expect(ok.status).toBe(200);
    } finally {
      await engine.close();
    }
  });

  it("runs steps without real waiting at an infinite time scale, and closes with requests in flight", async () => {
    const engine = await startSimEngine({ timeScale: Number.POSITIVE_INFINITY, profile: "llama-3.1-70b-h100-tp4" });
    const res = await post(engine, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 400, ignore_eos: true });
    expect(((await res.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(400);
    // 400 decode steps of ≥ 18.5 ms model time each went by.
    expect(engine.model.stats().busyMs).toBeGreaterThan(400 * 18.5);

    const slowEngine = await startSimEngine({ timeScale: 1 });
    const stream = await post(slowEngine, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 5_000, ignore_eos: true, stream: true });
    const reading = sseEvents(stream).catch((err: unknown) => err);
    await waitFor(() => slowEngine.model.numRunning === 1);
    await slowEngine.close();
    await engine.close();
    expect(await reading).toBeInstanceOf(Error);
    expect(slowEngine.model.stats()).toMatchObject({ running: 0, kvUsage: 0 });
  });
});
