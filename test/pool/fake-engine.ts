import type { AddressInfo } from "node:net";
import { type HttpBindings, serve } from "@hono/node-server";
import { Hono } from "hono";
import { KV_RETENTION_PATH, KV_RETENTION_TAG_FIELD, type KvRetentionAccepted, KvRetentionBatch } from "../../src/protocol/kv-retention.js";

/*
 * A controllable OpenAI-compatible engine for pool tests: every chat call is recorded
 * and answered as its behaviour says, so a test can hold a response open, fail before
 * the first byte, stream part of an answer, and see aborts and in-flight counts exactly.
 */

export type FakeBehavior =
  /** Whole JSON completion; held until release() when `hold`. */
  | { kind: "json"; hold?: boolean }
  /**
   * SSE: one content chunk at once, the rest (content, usage, [DONE]) after release();
   * with `breakAfterFirst` the connection is cut at release instead.
   */
  | { kind: "stream"; breakAfterFirst?: boolean }
  /** An immediate error answer with this status; `body` replaces the default OpenAI-shaped one. */
  | { kind: "status"; status: number; body?: string }
  /** A 200 JSON answer whose body breaks off after its first bytes (the connection is cut). */
  | { kind: "broken-json" };

export interface FakeCall {
  index: number;
  body: Record<string, unknown>;
  headers: Headers;
  /** Lets a held response finish. */
  release(): void;
  readonly aborted: Promise<void>;
  isAborted(): boolean;
  isFinished(): boolean;
}

export interface FakeEngine {
  url: string;
  calls: FakeCall[];
  /** KV retention batches received (only with the `retention` option). */
  retentionBatches: KvRetentionBatch[];
  /** Requests received and neither finished nor aborted. */
  inFlight(): number;
  /** Resolves with call number `index` (0-based) once it has arrived. */
  call(index: number, timeoutMs?: number): Promise<FakeCall>;
  setHealthy(healthy: boolean): void;
  setMetrics(text: string): void;
  /** GETs of /health and of /metrics answered so far. */
  probes(): { health: number; metrics: number };
  close(): Promise<void>;
}

/** What an answer reports beyond its text: usage figures and tool calls (OpenAI's shapes). */
export interface FakeAnswer {
  usage?: { prompt: number; completion: number; cached?: number };
  toolCalls?: { id: string; name: string; arguments: string }[];
  /** Fields added to a JSON answer's top level (a vLLM prefill engine's kv_transfer_params). */
  extra?: Record<string, unknown>;
}

export interface FakeEngineOptions {
  behave?: (call: FakeCall) => FakeBehavior;
  metrics?: string;
  /** Default: usage 5 prompt + 2 completion tokens, no tool calls. */
  answer?: (call: FakeCall) => FakeAnswer;
  /**
   * KV_RETENTION_PATH: "takes" parses each batch as an engine that takes hints would
   * (400 when it is not one), records it and counts as applied the hints whose tag a
   * call's body carried; "fails" answers 500. Unset: no such route (404), as a stock engine.
   */
  retention?: "takes" | "fails";
}

const usageOf = (answer: FakeAnswer) => {
  const { prompt, completion, cached } = answer.usage ?? { prompt: 5, completion: 2 };
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    ...(cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } }),
  };
};

const toolCallsOf = (answer: FakeAnswer) =>
  (answer.toolCalls ?? []).map((t) => ({ id: t.id, type: "function", function: { name: t.name, arguments: t.arguments } }));

const completion = (model: unknown, text: string, answer: FakeAnswer = {}) => ({
  id: "chatcmpl-fake",
  object: "chat.completion",
  created: 1,
  model,
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: text, ...(answer.toolCalls ? { tool_calls: toolCallsOf(answer) } : {}) },
      finish_reason: answer.toolCalls ? "tool_calls" : "stop",
    },
  ],
  usage: usageOf(answer),
  ...answer.extra,
});

const chunk = (model: unknown, content: string | null, usage?: object) => ({
  id: "chatcmpl-fake",
  object: "chat.completion.chunk",
  created: 1,
  model,
  choices: content === null ? [] : [{ index: 0, delta: { content }, finish_reason: null }],
  ...(usage ? { usage } : {}),
});

export async function startFakeEngine(options: FakeEngineOptions = {}): Promise<FakeEngine> {
  const calls: FakeCall[] = [];
  const waiters = new Map<number, (call: FakeCall) => void>();
  let healthy = true;
  let metricsText = options.metrics ?? "# no metrics\n";
  let active = 0;

  const app = new Hono<{ Bindings: HttpBindings }>();
  app.get("/health", (c) => {
    probes.health += 1;
    return healthy ? c.text("ok") : c.text("down", 503);
  });
  const probes = { health: 0, metrics: 0 };
  app.get("/metrics", (c) => {
    probes.metrics += 1;
    return c.text(metricsText);
  });
  // The health probe of "openai"-kind engines.
  app.get("/v1/models", (c) =>
    healthy ? c.json({ object: "list", data: [{ id: "test-model", object: "model" }] }) : c.text("down", 503),
  );
  const retentionBatches: KvRetentionBatch[] = [];
  if (options.retention !== undefined) {
    const mode = options.retention;
    app.post(KV_RETENTION_PATH, async (c) => {
      if (mode === "fails") return c.text("retention store unavailable", 500);
      const parsed = KvRetentionBatch.safeParse(await c.req.json());
      if (!parsed.success) return c.json({ error: { message: "invalid batch", type: "invalid_request_error", code: null, param: null } }, 400);
      retentionBatches.push(parsed.data);
      const held = new Set(calls.map((call) => call.body[KV_RETENTION_TAG_FIELD]));
      const accepted: KvRetentionAccepted = { applied: parsed.data.hints.filter((hint) => held.has(hint.tag)).length };
      return c.json(accepted);
    });
  }
  app.post("/v1/chat/completions", async (c) => {
    const body = (await c.req.json()) as Record<string, unknown>;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let markAborted!: () => void;
    const aborted = new Promise<void>((resolve) => (markAborted = resolve));
    let wasAborted = false;
    let finished = false;
    active += 1;
    const settle = (how: "finished" | "aborted") => {
      if (finished || wasAborted) return;
      if (how === "aborted") {
        wasAborted = true;
        markAborted();
      } else finished = true;
      active -= 1;
    };
    const call: FakeCall = {
      index: calls.length,
      body,
      headers: c.req.raw.headers,
      release,
      aborted,
      isAborted: () => wasAborted,
      isFinished: () => finished,
    };
    calls.push(call);
    c.req.raw.signal.addEventListener("abort", () => settle("aborted"), { once: true });
    waiters.get(call.index)?.(call);

    const behavior = options.behave?.(call) ?? { kind: "json" };
    const answer = options.answer?.(call) ?? {};
    const model = body.model;
    if (behavior.kind === "status") {
      settle("finished");
      if (behavior.body !== undefined) return c.body(behavior.body, behavior.status as 400, { "content-type": "application/json" });
      return c.json({ error: { message: `fake ${behavior.status}`, type: "server_error", code: null, param: null } }, behavior.status as 400);
    }
    if (behavior.kind === "broken-json") {
      const partial = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"id":"chatcmpl-fake","object":'));
          // Cut the connection once the headers and the first bytes are out.
          setTimeout(() => {
            settle("finished");
            c.env.outgoing.destroy();
          }, 20);
        },
      });
      return c.body(partial, 200, { "content-type": "application/json" });
    }
    if (behavior.kind === "json") {
      if (behavior.hold) await Promise.race([released, aborted]);
      if (wasAborted) return c.body(null, 500);
      settle("finished");
      return c.json(completion(model, "hello", answer));
    }
    const encoder = new TextEncoder();
    const event = (payload: unknown) => encoder.encode(`data: ${typeof payload === "string" ? payload : JSON.stringify(payload)}\n\n`);
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(event(chunk(model, "Hel")));
        await Promise.race([released, aborted]);
        if (wasAborted) return;
        if (behavior.breakAfterFirst) {
          settle("finished");
          c.env.outgoing.destroy();
          return;
        }
        controller.enqueue(event(chunk(model, "lo")));
        // Tool calls stream as deltas: the first names the call, the next ones append argument text.
        toolCallsOf(answer).forEach((toolCall, index) => {
          const half = Math.ceil(toolCall.function.arguments.length / 2);
          const delta = (part: object) => ({ ...chunk(model, null), choices: [{ index: 0, delta: { tool_calls: [{ index, ...part }] }, finish_reason: null }] });
          controller.enqueue(event(delta({ id: toolCall.id, type: "function", function: { name: toolCall.function.name, arguments: toolCall.function.arguments.slice(0, half) } })));
          controller.enqueue(event(delta({ function: { arguments: toolCall.function.arguments.slice(half) } })));
        });
        controller.enqueue(event(chunk(model, null, usageOf(answer))));
        controller.enqueue(event("[DONE]"));
        settle("finished");
        controller.close();
      },
      cancel() {
        settle("aborted");
      },
    });
    return c.body(stream, 200, { "content-type": "text/event-stream" });
  });

  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    retentionBatches,
    inFlight: () => active,
    call(index, timeoutMs = 5_000) {
      const existing = calls[index];
      if (existing) return Promise.resolve(existing);
      return new Promise<FakeCall>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`fake engine: call ${index} never arrived`)), timeoutMs);
        waiters.set(index, (call) => {
          clearTimeout(timer);
          resolve(call);
        });
      });
    },
    setHealthy: (value) => (healthy = value),
    setMetrics: (text) => (metricsText = text),
    probes: () => ({ ...probes }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const call of calls) call.release();
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
      }),
  };
}

/** A URL nothing listens on: connecting to it is refused. */
export async function refusedUrl(): Promise<string> {
  const server = serve({ fetch: () => new Response("x"), port: 0, hostname: "127.0.0.1" });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return `http://127.0.0.1:${port}`;
}
