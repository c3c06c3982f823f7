import { afterEach, describe, expect, it, vi } from "vitest";
import { AnthropicHeader, Header } from "../../src/protocol/headers";
import { formatMessagesEvent, type MessagesStreamEvent } from "../../src/protocol/messages";
import { POOL_PATHS, verifyForward } from "../../src/protocol/signing";
import { statsCommentEvent, statsHeaders } from "../../src/protocol/stats";
import { drain, edge, mockPool, newLimitedTenant, newTenant, POOL_KEYS, programHeader, sseResponse, type TestTenant, usageRows } from "./support";

/*
 * Issue 12: Anthropic's Messages API at the edge: x-api-key auth, the same pipeline as
 * chat (admission with the request's max_tokens, program, signed forwarding to the
 * pool's /v1/messages, metering as api "messages"), errors in Anthropic's shape and
 * rate limits under Anthropic's header names too.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const stats = { engine: "engine-m", queueMs: 3, serviceMs: 60 };
const REQUEST = { model: "test-model", max_tokens: 20, messages: [{ role: "user", content: "List the files." }] };

function send(tenant: TestTenant | undefined, body: unknown, path = "/v1/messages", headers: Record<string, string> = {}): Promise<Response> {
  return edge(path, {
    method: "POST",
    body: JSON.stringify(body),
    headers: {
      "content-type": "application/json",
      [AnthropicHeader.version]: "2023-06-01",
      ...(tenant ? { [AnthropicHeader.apiKey]: tenant.key } : {}),
      ...headers,
    },
  });
}

const message = (usage: Record<string, number>) => ({
  id: "msg_test",
  type: "message",
  role: "assistant",
  model: "test-model",
  content: [{ type: "text", text: "src/ test/" }],
  stop_reason: "end_turn",
  stop_sequence: null,
  usage,
});

async function expectAnthropicError(res: Response, status: number, type: string): Promise<string> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as { type: string; error: { type: string; message: string } };
  expect(Object.keys(body)).toEqual(["type", "error"]);
  expect(body.type).toBe("error");
  expect(body.error.type).toBe(type);
  return body.error.message;
}

describe("POST /v1/messages", () => {
  it("takes the key in x-api-key, forwards the request signed for the pool's /v1/messages, and meters Anthropic's usage", async () => {
    const seen = mockPool(() =>
      new Response(JSON.stringify(message({ input_tokens: 9, output_tokens: 4, cache_read_input_tokens: 30 })), {
        headers: { "content-type": "application/json", ...statsHeaders(stats) },
      }),
    );
    const tenant = await newTenant();
    const res = await send(tenant, REQUEST);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { content: { text: string }[] }).content[0]?.text).toBe("src/ test/");
    expect(res.headers.get(AnthropicHeader.requestId)).toBe(res.headers.get(Header.requestId));
    expect(Number(res.headers.get(AnthropicHeader.requestsRemaining))).toBe(Number(res.headers.get(AnthropicHeader.requestsLimit)) - 1);
    expect(Date.parse(res.headers.get(AnthropicHeader.tokensReset) ?? "")).toBeGreaterThan(Date.now() - 1_000);
    expect(res.headers.get("x-ratelimit-limit-requests")).not.toBeNull();

    // Claude Code's extended thinking is accepted (and answered without thinking blocks).
    expect((await send(tenant, { ...REQUEST, thinking: { type: "enabled", budget_tokens: 1024 }, service_tier: "auto" })).status).toBe(200);
    const forwarded = seen[0]!;
    expect(forwarded.request.url).toBe(`http://pool.test${POOL_PATHS.messages}`);
    expect(JSON.parse(new TextDecoder().decode(forwarded.body))).toEqual(REQUEST);
    const window = { now: Date.now(), windowMs: 60_000 };
    expect((await verifyForward(POOL_KEYS, { method: "POST", path: POOL_PATHS.messages }, forwarded.request.headers, forwarded.body, window)).ok).toBe(true);

    await drain();
    // Anthropic counts cache reads beside input_tokens; the ledger's prompt_tokens holds both.
    expect(await usageRows(programHeader(res)!)).toEqual([
      expect.objectContaining({ api: "messages", status: "ok", prompt_tokens: 39, cached_tokens: 30, completion_tokens: 4, usage_source: "engine" }),
    ]);
  });

  it("relays a stream as it comes and bills the usage of message_start and message_delta", async () => {
    const events: MessagesStreamEvent[] = [
      { type: "message_start", message: { ...message({ input_tokens: 12, output_tokens: 0 }), content: [], stop_reason: null } as never },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "src/" } },
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 5 } },
      { type: "message_stop" },
    ];
    const wire = [...events.map(formatMessagesEvent), statsCommentEvent(stats)];
    mockPool(() => sseResponse(wire));
    const tenant = await newTenant();
    const res = await send(tenant, { ...REQUEST, stream: true });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain("event: message_start");
    expect(text).toContain('"text":"src/"');
    expect(text).not.toContain("agentix");
    await drain();
    expect(await usageRows(programHeader(res)!)).toEqual([expect.objectContaining({ api: "messages", status: "ok", prompt_tokens: 12, completion_tokens: 5 })]);
  });

  it("tells a client reading a stream that broke off in Anthropic's event shape, and settles the call as an error", async () => {
    const start = formatMessagesEvent({ type: "message_start", message: { ...message({ input_tokens: 5, output_tokens: 0 }), content: [], stop_reason: null } as never });
    mockPool(() =>
      sseResponse(
        new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(new TextEncoder().encode(start));
          },
          // Once the first event was read: the connection drops.
          pull(controller) {
            controller.error(new Error("connection reset"));
          },
        }),
      ),
    );
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const tenant = await newTenant();
    const res = await send(tenant, { ...REQUEST, stream: true });
    const text = await res.text();
    expect(text).toContain("event: message_start");
    expect(text).toMatch(/event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"The GPU pool's stream broke off\./);
    await drain();
    expect(await usageRows(programHeader(res)!)).toEqual([expect.objectContaining({ api: "messages", status: "error" })]);
  });

  it("answers errors in Anthropic's shape: a missing or wrong key, an unknown field, an unserved model, a limit", async () => {
    const seen = mockPool(() => new Response("{}"));
    expect(await expectAnthropicError(await send(undefined, REQUEST), 401, "authentication_error")).toContain("x-api-key");
    await expectAnthropicError(await send(undefined, REQUEST, "/v1/messages", { [AnthropicHeader.apiKey]: "agx_wrong" }), 401, "authentication_error");
    const tenant = await newLimitedTenant({ max_output_tokens: 100 });
    expect(await expectAnthropicError(await send(tenant, { ...REQUEST, container: "c1" }), 400, "invalid_request_error")).toContain("container");
    await expectAnthropicError(await send(tenant, { ...REQUEST, model: "not-served" }), 404, "not_found_error");
    await expectAnthropicError(await send(tenant, { ...REQUEST, max_tokens: 500 }), 400, "invalid_request_error");
    const noLimit = { model: "test-model", messages: REQUEST.messages };
    await expectAnthropicError(await send(tenant, noLimit), 400, "invalid_request_error");
    expect(seen).toHaveLength(0);
  });

  it("answers a 429 in Anthropic's shape with retry-after and its rate-limit headers", async () => {
    mockPool(() => new Response(JSON.stringify(message({ input_tokens: 1, output_tokens: 1 })), { headers: statsHeaders(stats) }));
    const tenant = await newLimitedTenant({ rpm: 1 });
    expect((await send(tenant, REQUEST)).status).toBe(200);
    const limited = await send(tenant, REQUEST);
    await expectAnthropicError(limited, 429, "rate_limit_error");
    expect(limited.headers.get("retry-after")).not.toBeNull();
    expect(limited.headers.get(AnthropicHeader.requestsRemaining)).toBe("0");
    await drain();
  });

  it("counts tokens at the pool (an engine's tokenizer), else answers the edge's estimate; no quota; an unserved model is refused", async () => {
    let poolCounts = true;
    const seen = mockPool(() =>
      poolCounts
        ? new Response(JSON.stringify({ input_tokens: 1234 }), { headers: { "content-type": "application/json" } })
        : new Response(JSON.stringify({ error: { message: "No engine of this pool counts tokens now", code: "token_count_unavailable" } }), { status: 501 }),
    );
    const tenant = await newTenant();
    const request = { model: "test-model", system: "Be brief.", messages: REQUEST.messages };
    const counted = await send(tenant, request, "/v1/messages/count_tokens");
    expect(counted.status).toBe(200);
    expect(counted.headers.get(Header.tokenCountSource)).toBe("engine");
    expect(await counted.json()).toEqual({ input_tokens: 1234 });
    // Signed for the pool's count route, with the request as the edge validated it.
    expect(new URL(seen[0]!.request.url).pathname).toBe(POOL_PATHS.countTokens);
    expect(seen[0]!.request.headers.get(Header.program)).toBe("edge");
    expect(JSON.parse(new TextDecoder().decode(seen[0]!.body))).toEqual(request);

    poolCounts = false;
    const estimated = await send(tenant, request, "/v1/messages/count_tokens");
    expect(estimated.status).toBe(200);
    expect(estimated.headers.get(Header.tokenCountSource)).toBe("estimate");
    const body = (await estimated.json()) as { input_tokens: number };
    expect(Object.keys(body)).toEqual(["input_tokens"]);
    expect(body.input_tokens).toBeGreaterThan(3);
    expect(body.input_tokens).not.toBe(1234);

    const asked = seen.length;
    await expectAnthropicError(await send(tenant, { model: "nope", messages: REQUEST.messages }, "/v1/messages/count_tokens"), 404, "not_found_error");
    expect(seen).toHaveLength(asked);
  });
});
