import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { POOL_TROUBLE_RETRY_AFTER_S } from "../../src/edge/chat/relay";
import { database } from "../../src/edge/db/client";
import { usageLedger } from "../../src/edge/ledger/access";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { programSession } from "../../src/edge/program/access";
import { Header, RateLimitHeader } from "../../src/protocol/headers";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";
import { statsCommentEvent } from "../../src/protocol/stats";
import {
  chatBody,
  chunk,
  drain,
  edge,
  expectOpenAIError,
  limitsOf,
  mockPool,
  newTenant,
  poolJson,
  programHeader,
  sseResponse,
  type TestTenant,
  tenantFetch,
  unreachableD1,
  usageObject,
  usageRows,
} from "./support";

/*
 * Every way a call can end settles it exactly once, frees its concurrency slot
 * and records what the engine did: finished, client gone (cancelled, or just no
 * longer reading), pool gone, pool silent, the call's deadline, our own fault.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

/** The edge with some vars changed (a fresh Env object, so its config is parsed anew). */
function chatWith(
  vars: Record<string, string>,
  tenant: TestTenant,
  body: string,
  init: RequestInit = {},
): Promise<Response> {
  return edge(
    "/v1/chat/completions",
    {
      method: "POST",
      body,
      ...init,
      headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" },
    },
    { ...env, ...vars },
  );
}

/**
 * A pool stream that sends `parts` as chunks carrying the engine's running usage
 * (vLLM's continuous_usage_stats), then never ends: it only stops when cancelled.
 */
function endlessPoolStream(parts: string[], prompt = 40): { stream: ReadableStream<Uint8Array>; cancelled: Promise<unknown> } {
  const encoder = new TextEncoder();
  let cancelledWith!: (reason: unknown) => void;
  const cancelled = new Promise<unknown>((resolve) => {
    cancelledWith = resolve;
  });
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      parts.forEach((part, i) =>
        controller.enqueue(
          encoder.encode(dataEvent(chunk(part, { usage: usageObject({ prompt, completion: i + 1 }) }))),
        ),
      );
    },
    cancel(reason) {
      cancelledWith(reason ?? "cancelled");
    },
  });
  return { stream, cancelled };
}

async function concurrencyInUse(tenant: TestTenant): Promise<number> {
  const peek = await tenantLimiter(env, tenant.id).peek({ now: Date.now(), limits: await limitsOf(tenant) });
  return peek.inFlight;
}

async function inFlight(tenant: TestTenant, programId: string): Promise<number> {
  const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { in_flight: number };
  return state.in_flight;
}

/** Reads the client's side until `count` content chunks arrived. */
async function readChunks(reader: ReadableStreamDefaultReader<Uint8Array>, count: number): Promise<string> {
  let seen = "";
  while ((seen.match(/"content"/g) ?? []).length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += new TextDecoder().decode(value);
  }
  return seen;
}

describe("a stream the client leaves", () => {
  it("is settled with the engine's own count when the client's connection drops (request.signal) without cancelling the body", async () => {
    const pool = endlessPoolStream(["a", "b", "c", "d", "e"]);
    mockPool(() => sseResponse(pool.stream));
    const tenant = await newTenant();
    const client = new AbortController();
    const res = await chatWith({}, tenant, chatBody({ stream: true }), { signal: client.signal });
    const programId = programHeader(res)!;
    expect(res.headers.get(Header.requestId)).toMatch(/^call_/);
    const seen = await readChunks(res.body!.getReader(), 2);
    // The engine's per-chunk usage is the edge's: the client never sees it.
    expect(seen).not.toContain("prompt_tokens");

    client.abort();
    await drain();
    await expect(pool.cancelled).resolves.toBeDefined();
    const rows = await usageRows(programId);
    expect(rows).toHaveLength(1);
    // Five chunks reached the edge before the client left; their engine count is what is billed.
    expect(rows[0]).toMatchObject({ status: "cancelled", usage_source: "engine_partial", prompt_tokens: 40 });
    expect(Number(rows[0]!.completion_tokens)).toBeGreaterThanOrEqual(2);
    expect(await inFlight(tenant, programId)).toBe(0);
    expect(await concurrencyInUse(tenant)).toBe(0);
  });

  it("is settled as cancelled when the client stops reading, after STREAM_STALL_MS", async () => {
    const pool = endlessPoolStream(["a", "b"]);
    mockPool(() => sseResponse(pool.stream));
    const tenant = await newTenant();
    const res = await chatWith({ STREAM_STALL_MS: "150" }, tenant, chatBody({ stream: true }));
    const programId = programHeader(res)!;
    // The client never reads a byte and never hangs up: only the stall rule can end the call.
    await drain();
    await expect(pool.cancelled).resolves.toBeDefined();
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "cancelled" })]);
    expect(await concurrencyInUse(tenant)).toBe(0);
  });
});

describe("a stream the pool or the clock ends", () => {
  it("is cut at the call's deadline: the client is told, the pool's work stops, the row says timeout", async () => {
    const pool = endlessPoolStream(["a", "b", "c"]);
    mockPool(() => sseResponse(pool.stream));
    const tenant = await newTenant();
    const res = await chatWith({ CALL_TIMEOUT_MS: "300" }, tenant, chatBody({ stream: true }));
    const programId = programHeader(res)!;
    const text = await res.text();
    expect(text).toContain('"code":"call_timeout"');
    expect(text).not.toContain("[DONE]");
    await drain();
    await expect(pool.cancelled).resolves.toBeDefined();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ status: "timeout", usage_source: "engine_partial", completion_tokens: 3, prompt_tokens: 40 }),
    ]);
    expect(await concurrencyInUse(tenant)).toBe(0);
  });

  it("is cut when the pool falls silent for POOL_IDLE_MS, settled as an error", async () => {
    const pool = endlessPoolStream(["a"]);
    mockPool(() => sseResponse(pool.stream));
    const tenant = await newTenant();
    const res = await chatWith({ POOL_IDLE_MS: "150" }, tenant, chatBody({ stream: true }));
    const programId = programHeader(res)!;
    expect(await res.text()).toContain('"code":"pool_stream_broken"');
    await drain();
    await expect(pool.cancelled).resolves.toBeDefined();
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "error", usage_source: "engine_partial" })]);
    expect(await concurrencyInUse(tenant)).toBe(0);
  });

  it("bills the whole usage, as the engine reported it, when the stream finishes", async () => {
    const encoder = new TextEncoder();
    const events = [
      dataEvent(chunk("x", { usage: usageObject({ prompt: 40, completion: 1 }) })),
      dataEvent(chunk("y", { usage: usageObject({ prompt: 40, completion: 2 }) })),
      dataEvent(chunk(null, { usage: usageObject({ prompt: 40, completion: 2, cached: 8 }) })),
      statsCommentEvent({ engine: "engine-a", queueMs: 3, serviceMs: 50 }),
      formatEvent(DONE_EVENT),
    ];
    mockPool(() => sseResponse(new ReadableStream({ start: (c) => { for (const e of events) c.enqueue(encoder.encode(e)); c.close(); } })));
    const tenant = await newTenant();
    const res = await chatWith({}, tenant, chatBody({ stream: true, stream_options: { include_usage: true } }));
    const programId = programHeader(res)!;
    const data = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)) as { usage: unknown; choices: unknown[] });
    // Output chunks carry usage: null (OpenAI's form when include_usage is set); the last chunk carries the whole figure.
    expect(data.map((d) => d.usage === null)).toEqual([true, true, false]);
    await drain();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ status: "ok", usage_source: "engine", prompt_tokens: 40, completion_tokens: 2, cached_tokens: 8 }),
    ]);
  });
});

describe("a call the pool never answers", () => {
  it("times out before the first byte with 504 call_timeout and frees the slot", async () => {
    mockPool(
      ({ signal }) =>
        new Promise<Response>((_resolve, reject) => {
          signal?.addEventListener("abort", () => reject(signal.reason));
        }),
    );
    const tenant = await newTenant();
    const res = await chatWith({ CALL_TIMEOUT_MS: "200" }, tenant, chatBody());
    const error = await expectOpenAIError(res, 504);
    expect(error.error.code).toBe("call_timeout");
    const programId = programHeader(res)!;
    await drain();
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "timeout", usage_source: "none", prompt_tokens: 0 })]);
    expect(await concurrencyInUse(tenant)).toBe(0);
  });

  it("answers 502 pool_unreachable with Retry-After and the request ID", async () => {
    mockPool(() => {
      throw new TypeError("Network connection lost.");
    });
    const tenant = await newTenant();
    const res = await chatWith({}, tenant, chatBody());
    const error = await expectOpenAIError(res, 502);
    expect(error.error.code).toBe("pool_unreachable");
    expect(res.headers.get(RateLimitHeader.retryAfter)).toBe(String(POOL_TROUBLE_RETRY_AFTER_S));
    const requestId = res.headers.get(Header.requestId)!;
    expect(error.error.message).toContain(requestId);
    await drain();
    expect(await concurrencyInUse(tenant)).toBe(0);
  });

  it("never shows the tenant the pool's own text for a failure on our side", async () => {
    mockPool(
      () =>
        new Response(
          JSON.stringify({
            error: {
              message: "engine sim-2 unreachable (ECONNREFUSED: connect ECONNREFUSED 10.0.3.7:8000)",
              type: "server_error",
              code: "engine_unavailable",
              param: null,
            },
          }),
          { status: 503, headers: { "content-type": "application/json" } },
        ),
    );
    const tenant = await newTenant();
    const res = await chatWith({}, tenant, chatBody());
    const text = await res.clone().text();
    expect(res.status).toBe(503);
    expect(text).not.toMatch(/sim-2|ECONNREFUSED|10\.0\.3\.7/);
    const error = await expectOpenAIError(res, 503);
    expect(error.error.code).toBe("engine_unavailable");
    expect(res.headers.get(RateLimitHeader.retryAfter)).toBe(String(POOL_TROUBLE_RETRY_AFTER_S));
  });

  it("keeps the pool's message for a refusal of the request itself (4xx)", async () => {
    mockPool(
      () =>
        new Response(
          JSON.stringify({
            error: { message: "This model's maximum context length is 8192 tokens.", type: "invalid_request_error", code: "context_length_exceeded", param: "messages" },
          }),
          { status: 400, headers: { "content-type": "application/json" } },
        ),
    );
    const tenant = await newTenant();
    const res = await chatWith({}, tenant, chatBody());
    const error = await expectOpenAIError(res, 400);
    expect(error.error).toMatchObject({ code: "context_length_exceeded", param: "messages" });
    expect(error.error.message).toContain("maximum context length is 8192 tokens");
  });

  it("relays the pool's 404 for a model it does not serve with OpenAI's type and code", async () => {
    mockPool(
      () =>
        new Response(
          JSON.stringify({
            error: { message: 'The model "my-lora" does not exist or you do not have access to it', type: "invalid_request_error", code: "model_not_found", param: "model" },
          }),
          { status: 404, headers: { "content-type": "application/json" } },
        ),
    );
    const tenant = await newTenant();
    const res = await chatWith({}, tenant, chatBody());
    const error = await expectOpenAIError(res, 404);
    expect(error.error).toMatchObject({ type: "invalid_request_error", code: "model_not_found", param: "model" });
  });
});

describe("the ledger through a D1 outage", () => {
  it("keeps a call settled during the outage and writes it exactly once when D1 is back", async () => {
    mockPool(() => poolJson({ usage: { prompt: 20, completion: 4 } }));
    const tenant = await newTenant();
    const first = await chatWith({}, tenant, chatBody());
    const programId = programHeader(first)!;
    await first.text();
    await drain();
    expect(await usageRows(programId)).toHaveLength(1);

    const session = programSession(env, tenant.id, programId);
    // The tenant's ledger writes the rows to D1 (the program hands them to it at settle).
    const ledger = usageLedger(env, tenant.id);
    // D1 answers the ledger nothing (an outage: a probe neither), so nothing is taken for a refused row.
    const realDb: unknown = await runInDurableObject(ledger, (instance: object) => {
      const db: unknown = Reflect.get(instance, "db");
      Reflect.set(instance, "db", database(unreachableD1()));
      return db;
    });
    const second = await tenantFetch(tenant, "/v1/chat/completions", {
      method: "POST",
      body: chatBody(),
      headers: { "content-type": "application/json", [Header.program]: programId },
    });
    expect(second.status).toBe(200);
    await second.text();
    await drain();
    // Settled in the program (and the slot freed) though D1 refused the row.
    expect(await usageRows(programId)).toHaveLength(1);
    expect(await inFlight(tenant, programId)).toBe(0);
    expect(await concurrencyInUse(tenant)).toBe(0);
    // The ledger holds the row the outage kept from D1.
    expect(await ledger.pendingCounts()).toMatchObject({ rows: 1 });

    vi.restoreAllMocks();
    await runInDurableObject(ledger, (instance: object) => void Reflect.set(instance, "db", realDb));
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    const rows = await usageRows(programId);
    expect(rows).toHaveLength(2);
    expect(rows.map((row) => row.completion_tokens)).toEqual([4, 4]);
    // A second retry (alarm) and a late repeated settle add nothing.
    await runDurableObjectAlarm(ledger);
    await runDurableObjectAlarm(session);
    const callId = String(rows[1]!.call_id);
    expect(
      await session.settleCall({
        callId,
        status: "ok",
        promptTokens: 999,
        cachedTokens: 0,
        completionTokens: 999,
        usageSource: "engine",
        serviceMs: 1,
        queueMs: 1,
        engine: "e",
        finishedAt: Date.now(),
      }),
    ).toMatchObject({ settled: false, reason: "already_settled" });
    expect(await usageRows(programId)).toHaveLength(2);
  });
});
