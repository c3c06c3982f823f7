import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { responseIdFor } from "../../src/protocol/response-ids.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { eventData, eventObject, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { metricValue, operatorGet, signedCall, testConfig } from "./helpers.js";

/*
 * Issue 12: an engine configured to serve Messages or Responses natively gets the call
 * in its own API (vLLM's shapes: no stream_options, store false, the pool's priority),
 * its answer passes with the pool's response ID and the pool reads its usage; an
 * engine that is not gets a chat completion. Which form is decided per attempt, so a
 * retry moves a call between them. The engines here answer as vLLM's native routes
 * do (Messages without null fields, Responses usage without cache_write_tokens).
 */

interface Received {
  engine: string;
  path: string;
  body: Record<string, unknown>;
}

const received: Received[] = [];
/** Engines answering 503 to every call (a retry test's failing engine). */
const failing = new Set<string>();

const sse = (events: { type: string; [key: string]: unknown }[]) =>
  events.map((event) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`).join("");

const messagesUsage = { input_tokens: 30, output_tokens: 4, cache_read_input_tokens: 70 };
const responsesUsage = { input_tokens: 100, input_tokens_details: { cached_tokens: 64 }, output_tokens: 4, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 104 };

function messageAnswer(model: unknown) {
  return {
    id: "msg_engine1",
    type: "message",
    role: "assistant",
    model,
    content: [
      { type: "text", text: "Running it." },
      { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } },
    ],
    stop_reason: "tool_use",
    usage: messagesUsage,
  };
}

function responseObject(model: unknown, status: string, usage: unknown) {
  return {
    id: "resp_engineown",
    object: "response",
    created_at: 1,
    model,
    status,
    store: false,
    output: [
      { id: "rs_1", type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "think" }] },
      { id: "fc_1", type: "function_call", call_id: "call_1", name: "bash", arguments: '{"command":"ls"}', status: "completed" },
    ],
    usage,
  };
}

function chatAnswer(model: unknown) {
  return {
    id: "chatcmpl-x",
    object: "chat.completion",
    created: 1,
    model,
    choices: [{ index: 0, message: { role: "assistant", content: "From chat." }, finish_reason: "stop" }],
    usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
  };
}

async function startRecordingEngine(id: string) {
  const app = new Hono();
  app.get("/health", (c) => c.text("ok"));
  app.get("/metrics", (c) => c.text("# none\n"));
  app.post("/v1/*", async (c) => {
    const body = (await c.req.json()) as Record<string, unknown>;
    received.push({ engine: id, path: c.req.path, body });
    if (failing.has(id)) return c.json({ error: { message: "overloaded", type: "server_error" } }, 503);
    const stream = body.stream === true;
    if (c.req.path === "/v1/chat/completions") return c.json(chatAnswer(body.model));
    if (c.req.path === "/v1/messages") {
      if (!stream) return c.json(messageAnswer(body.model));
      const text = sse([
        { type: "message_start", message: { ...messageAnswer(body.model), content: [], stop_reason: null, usage: { ...messagesUsage, output_tokens: 0 } } },
        { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Run" } },
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "ning." } },
        { type: "content_block_stop", index: 0 },
        { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } },
        { type: "message_stop" },
      ]);
      return c.body(text, 200, { "content-type": "text/event-stream" });
    }
    if (c.req.path === "/v1/responses") {
      if (!stream) return c.json(responseObject(body.model, "completed", responsesUsage));
      const text = sse([
        { type: "response.created", sequence_number: 0, response: responseObject(body.model, "in_progress", null) },
        { type: "response.output_text.delta", sequence_number: 1, item_id: "msg_1", output_index: 0, content_index: 0, delta: "Hi" },
        { type: "response.completed", sequence_number: 2, response: responseObject(body.model, "completed", responsesUsage) },
      ]);
      return c.body(text, 200, { "content-type": "text/event-stream" });
    }
    return c.json({ error: { message: "no route" } }, 404);
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

type Engine = Awaited<ReturnType<typeof startRecordingEngine>>;
let nativeEngine: Engine;
let chatEngine: Engine;
let nativePool: PoolHandle;
let mixedPool: PoolHandle;

beforeAll(async () => {
  nativeEngine = await startRecordingEngine("native");
  chatEngine = await startRecordingEngine("chat-only");
  nativePool = await startPool(testConfig({ engines: [{ id: "native", url: nativeEngine.url, nativeApis: ["messages", "responses"] }] }));
  // Both engines; the test makes the native one fail so the retry lands on the chat-only one.
  mixedPool = await startPool(
    testConfig({
      engines: [
        { id: "native", url: nativeEngine.url, nativeApis: ["messages", "responses"] },
        { id: "chat-only", url: chatEngine.url },
      ],
      scheduling: { routing: { policy: "round-robin" } },
    }),
  );
});
afterAll(async () => {
  await nativePool?.close();
  await mixedPool?.close();
  await nativeEngine?.close();
  await chatEngine?.close();
});
afterEach(() => {
  received.length = 0;
  failing.clear();
});

const PROGRAM = "prog_nativeapis01";

async function call(pool: PoolHandle, path: typeof POOL_PATHS.messages | typeof POOL_PATHS.responses, body: Record<string, unknown>) {
  const signed = await signedCall({ path, fields: { program: PROGRAM }, body });
  const res = await fetch(`${pool.url}${path}`, { method: "POST", headers: signed.headers, body: signed.body });
  return { res, callId: signed.fields.call };
}

async function events(res: Response): Promise<string[]> {
  const out: string[] = [];
  const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return out;
    out.push(next.value);
  }
}

const tokens = async (pool: PoolHandle, kind: "prompt" | "completion") =>
  metricValue(await (await operatorGet(pool.url, "/metrics")).text(), `agentix_pool_engine_tokens_total{engine="native",kind="${kind}",outcome="completed"}`) ?? 0;

const messagesBody = { model: "test-model", max_tokens: 64, messages: [{ role: "user", content: "List the files." }] };
const responsesBody = { model: "test-model", max_output_tokens: 64, input: "List the files." };

describe("an engine that serves Messages natively", () => {
  it("gets the call as it came (priority added, no stream_options), its answer passes as written and its usage is read", async () => {
    const promptBefore = await tokens(nativePool, "prompt");
    const { res } = await call(nativePool, POOL_PATHS.messages, { ...messagesBody, stream: false });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    // vLLM's answer, untouched: no stop_sequence (it drops nulls), the tool_use block as the engine wrote it.
    expect(body).toEqual(messageAnswer("test-model"));
    expect(statsFromHeaders(res.headers)).toMatchObject({ engine: "native" });
    expect(received).toHaveLength(1);
    expect(received[0]).toMatchObject({ path: "/v1/messages", body: { ...messagesBody, stream: false, priority: 0 } });
    // Usage in Anthropic's terms, read as the prompt it is: input + cache reads.
    expect((await tokens(nativePool, "prompt")) - promptBefore).toBe(100);
  });

  it("streams the engine's events with the stats comment before message_stop, and reads the stream's usage", async () => {
    const completionBefore = await tokens(nativePool, "completion");
    const { res } = await call(nativePool, POOL_PATHS.messages, { ...messagesBody, stream: true });
    expect(res.status).toBe(200);
    const out = await events(res);
    expect(received[0]?.body).not.toHaveProperty("stream_options");
    const statsAt = out.findIndex((e) => parseStatsEvent(e) !== undefined);
    const stopAt = out.findIndex((e) => eventObject(e)?.type === "message_stop");
    expect(statsAt).toBeGreaterThan(0);
    expect(stopAt).toBe(out.length - 1);
    expect(statsAt).toBe(stopAt - 1);
    expect((await tokens(nativePool, "completion")) - completionBefore).toBe(2);
  });
});

describe("an engine that serves Responses natively", () => {
  it("is told not to store, and its response carries the pool's ID and the store the client asked", async () => {
    const { res, callId } = await call(nativePool, POOL_PATHS.responses, responsesBody);
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    // The input as the pool validated it: the string is its one-message form.
    const input = [{ type: "message", role: "user", content: [{ type: "input_text", text: "List the files." }] }];
    expect(received[0]).toMatchObject({ path: "/v1/responses", body: { ...responsesBody, input, store: false, priority: 0 } });
    expect(body.id).toBe(responseIdFor(PROGRAM, callId));
    expect(body.store).toBe(true);
    // The rest is the engine's, reasoning item included.
    expect(body.output).toEqual(responseObject("test-model", "completed", responsesUsage).output);
  });

  it("streams with the pool's ID on every response object and the stats before response.completed", async () => {
    const promptBefore = await tokens(nativePool, "prompt");
    const { res, callId } = await call(nativePool, POOL_PATHS.responses, { ...responsesBody, stream: true, store: false });
    const out = await events(res);
    const payloads = out.map(eventObject).filter((p) => p !== undefined);
    const ids = payloads.flatMap((p) => (typeof p.response === "object" && p.response !== null ? [(p.response as { id: string; store: boolean })] : []));
    expect(ids.map((r) => r.id)).toEqual([responseIdFor(PROGRAM, callId), responseIdFor(PROGRAM, callId)]);
    expect(ids.every((r) => r.store === false)).toBe(true);
    // The event lines survive the rewrite.
    expect(out.filter((e) => eventData(e) !== undefined).every((e) => e.startsWith("event: "))).toBe(true);
    const statsAt = out.findIndex((e) => parseStatsEvent(e) !== undefined);
    expect(statsAt).toBe(out.length - 2);
    expect((await tokens(nativePool, "prompt")) - promptBefore).toBe(100);
  });
});

describe("a retry between an engine that serves the API and one that does not", () => {
  it("sends the failed attempt natively and the retry as a chat completion, answered in the call's API", async () => {
    failing.add("native");
    // Round-robin spreads first attempts; call until one has gone to the failing engine first.
    for (let i = 0; i < 6 && !received.some((r) => r.engine === "native"); i++) {
      const { res, callId } = await call(mixedPool, POOL_PATHS.responses, responsesBody);
      expect(res.status).toBe(200);
      const body = (await res.json()) as { id: string; object: string; output: { type: string; content?: { text: string }[] }[] };
      expect(body.id).toBe(responseIdFor(PROGRAM, callId));
      expect(body.object).toBe("response");
      expect(body.output[0]?.content?.[0]?.text).toBe("From chat.");
    }
    expect(received.filter((r) => r.engine === "native").map((r) => r.path)).toEqual(["/v1/responses"]);
    const viaChat = received.filter((r) => r.engine === "chat-only");
    expect(viaChat.length).toBeGreaterThan(0);
    expect(viaChat.every((r) => r.path === "/v1/chat/completions")).toBe(true);
    expect(viaChat[0]?.body).toMatchObject({ messages: [{ role: "user", content: "List the files." }], max_tokens: 64 });
    expect(viaChat[0]?.body).not.toHaveProperty("input");
  });
});
