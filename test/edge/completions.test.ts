import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import { POOL_PATHS, verifyForward } from "../../src/protocol/signing";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";
import { statsCommentEvent, statsHeaders } from "../../src/protocol/stats";
import {
  drain,
  edge,
  expectOpenAIError,
  mockPool,
  newTenant,
  POOL_KEYS,
  programHeader,
  sseResponse,
  type TestTenant,
  usageObject,
  usageRows,
} from "./support";

/*
 * Issue 12: OpenAI's legacy completions API through the same pipeline as chat:
 * allow-listed, admitted with its limit, begun in its program, signed for the pool's
 * /v1/completions, metered, and recorded as api "completions" in the ledger.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const COMPLETIONS_URL = `http://pool.test${POOL_PATHS.completions}`;
const stats = { engine: "engine-c", queueMs: 2, serviceMs: 40 };

function complete(tenant: TestTenant, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return edge("/v1/completions", {
    method: "POST",
    body: JSON.stringify({ model: "test-model", prompt: "def fib(n):", ...body }),
    headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", ...headers },
  });
}

const textCompletion = (text: string, usage = { prompt: 4, completion: 3 }) => ({
  id: "cmpl-test",
  object: "text_completion",
  created: 1_700_000_000,
  model: "test-model",
  choices: [{ index: 0, text, finish_reason: "length", logprobs: null }],
  usage: usageObject(usage),
});

describe("POST /v1/completions", () => {
  it("forwards the allowed request with the reserved limit, signed for the pool's completions route, and meters it", async () => {
    const seen = mockPool(() => new Response(JSON.stringify(textCompletion(" return n")), { headers: { "content-type": "application/json", ...statsHeaders(stats) } }));
    const tenant = await newTenant();
    const res = await complete(tenant, { max_tokens: 12, temperature: 0.2 });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: { text: string }[] }).choices[0]?.text).toBe(" return n");
    const programId = programHeader(res)!;
    expect(res.headers.get(Header.pool)).toBe("pool-test");

    expect(seen).toHaveLength(1);
    const forwarded = seen[0]!;
    expect(forwarded.request.url).toBe(COMPLETIONS_URL);
    expect(JSON.parse(new TextDecoder().decode(forwarded.body))).toEqual({ model: "test-model", prompt: "def fib(n):", max_tokens: 12, temperature: 0.2 });
    const window = { now: Date.now(), windowMs: 60_000 };
    expect((await verifyForward(POOL_KEYS, { method: "POST", path: POOL_PATHS.completions }, forwarded.request.headers, forwarded.body, window)).ok).toBe(true);
    // Bound to its route: the same bytes do not pass as a chat call.
    expect((await verifyForward(POOL_KEYS, { method: "POST", path: POOL_PATHS.chatCompletions }, forwarded.request.headers, forwarded.body, window)).ok).toBe(false);

    await drain();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ api: "completions", status: "ok", prompt_tokens: 4, completion_tokens: 3, engine: "engine-c", usage_source: "engine" }),
    ]);
  });

  it("sets the plan's default limit when the client sends none (not OpenAI's 16)", async () => {
    const seen = mockPool(() => new Response(JSON.stringify(textCompletion("x")), { headers: statsHeaders(stats) }));
    const tenant = await newTenant();
    expect((await complete(tenant, {})).status).toBe(200);
    const sent = JSON.parse(new TextDecoder().decode(seen[0]!.body)) as { max_tokens: number };
    expect(sent.max_tokens).toBeGreaterThan(16);
    await drain();
  });

  it("streams: the usage chunk reaches the client only when it asked, and the call is billed the engine's count", async () => {
    const chunk = (text: string | null, extra: Record<string, unknown> = {}) => ({
      id: "cmpl-test",
      object: "text_completion",
      created: 1,
      model: "test-model",
      choices: text === null ? [] : [{ index: 0, text, finish_reason: null }],
      ...extra,
    });
    const events = [dataEvent(chunk(" re")), dataEvent(chunk("turn")), dataEvent(chunk(null, { usage: usageObject({ prompt: 4, completion: 2 }) })), statsCommentEvent(stats), formatEvent(DONE_EVENT)];
    mockPool(() => sseResponse(events));
    const tenant = await newTenant();
    for (const includeUsage of [false, true]) {
      const res = await complete(tenant, { stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text).toContain('"text":" re"');
      expect(text.includes('"completion_tokens":2')).toBe(includeUsage);
      expect(text).not.toContain("agentix");
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
      await drain();
      expect(await usageRows(programHeader(res)!)).toEqual([expect.objectContaining({ api: "completions", status: "ok", completion_tokens: 2 })]);
    }
  });

  it("refuses a field completions does not have, or a chat body, with 400 naming it, sending nothing", async () => {
    const seen = mockPool(() => new Response("{}"));
    const tenant = await newTenant();
    const extra = await expectOpenAIError(await complete(tenant, { ignore_eos: true }), 400, "invalid_request_error");
    expect(extra.error).toMatchObject({ code: "unsupported_parameter", param: "ignore_eos" });
    expect(extra.error.message).toContain("completions fields");
    const chatShaped = await edge("/v1/completions", {
      method: "POST",
      body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: "hi" }] }),
      headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" },
    });
    expect((await expectOpenAIError(chatShaped, 400, "invalid_request_error")).error.param).toBe("prompt");
    const twoChoices = await expectOpenAIError(await complete(tenant, { n: 2 }), 400, "invalid_request_error");
    expect(twoChoices.error.param).toBe("n");
    expect(seen).toHaveLength(0);
  });

  it("joins the program named by the header, like chat calls", async () => {
    mockPool(() => new Response(JSON.stringify(textCompletion("x")), { headers: statsHeaders(stats) }));
    const tenant = await newTenant();
    const first = await complete(tenant, {});
    const programId = programHeader(first)!;
    const second = await complete(tenant, {}, { [Header.program]: programId });
    expect(programHeader(second)).toBe(programId);
    await drain();
    expect(await usageRows(programId)).toHaveLength(2);
  });
});
