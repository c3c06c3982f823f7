import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import { responseIdFor } from "../../src/protocol/response-ids";
import { formatResponsesEvent } from "../../src/protocol/responses";
import { POOL_PATHS } from "../../src/protocol/signing";
import { statsCommentEvent, statsHeaders } from "../../src/protocol/stats";
import { drain, edge, expectOpenAIError, type ForwardedRequest, mockPool, newTenant, programHeader, sseResponse, type TestTenant, usageRows } from "./support";

/*
 * Issue 12: OpenAI's Responses API at the edge: the shared pipeline, a response kept
 * in its program, previous_response_id expanded into the conversation before the pool
 * sees the call, and the call joining the response's program without any header.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const stats = { engine: "engine-r", queueMs: 1, serviceMs: 30 };

function respond(tenant: TestTenant, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<Response> {
  return edge("/v1/responses", {
    method: "POST",
    body: JSON.stringify({ model: "test-model", max_output_tokens: 16, ...body }),
    headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", ...headers },
  });
}

/** The pool's answer: a response whose ID names the call's program and call, as the pool mints it. */
function responseFor(f: ForwardedRequest, text: string) {
  const id = responseIdFor(f.request.headers.get(Header.program)!, f.request.headers.get(Header.call)!);
  return {
    id,
    object: "response",
    created_at: 1_700_000_000,
    status: "completed",
    model: "test-model",
    output: [{ id: `msg_${id.slice(5)}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] }],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 4, cache_write_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 13 },
  };
}

/** A user turn's text as the request schema normalises it. */
const said = (text: string) => [{ type: "input_text", text }];

const forwardedBody = (f: ForwardedRequest) => JSON.parse(new TextDecoder().decode(f.body)) as { input: { role?: string; content: unknown }[]; previous_response_id?: string };

describe("POST /v1/responses", () => {
  it("answers through the pool's /v1/responses and meters the response's usage", async () => {
    const seen = mockPool((f) => new Response(JSON.stringify(responseFor(f, "ok")), { headers: { "content-type": "application/json", ...statsHeaders(stats) } }));
    const tenant = await newTenant();
    const res = await respond(tenant, { input: "List the files.", instructions: "Be terse." });
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.programSource)).toBe("new");
    expect(seen[0]?.request.url).toBe(`http://pool.test${POOL_PATHS.responses}`);
    expect(forwardedBody(seen[0]!)).toMatchObject({
      input: [{ role: "user", content: [{ type: "input_text", text: "List the files." }] }],
      instructions: "Be terse.",
      max_output_tokens: 16,
    });
    await drain();
    expect(await usageRows(programHeader(res)!)).toEqual([
      expect.objectContaining({ api: "responses", status: "ok", prompt_tokens: 10, cached_tokens: 4, completion_tokens: 3 }),
    ]);
  });

  it("continues a chain by previous_response_id: the pool gets the whole conversation, and the call joins the response's program", async () => {
    let turn = 0;
    const seen = mockPool((f) => {
      turn += 1;
      return new Response(JSON.stringify(responseFor(f, `answer ${turn}`)), { headers: statsHeaders(stats) });
    });
    const tenant = await newTenant();
    const first = await respond(tenant, { input: "one" });
    const firstBody = (await first.json()) as { id: string };
    const programId = programHeader(first)!;
    await drain();

    const second = await respond(tenant, { input: "two", previous_response_id: firstBody.id });
    expect(second.status).toBe(200);
    expect(programHeader(second)).toBe(programId);
    expect(second.headers.get(Header.programSource)).toBe("previous_response_id");
    const secondBody = (await second.json()) as { id: string };
    await drain();
    const sent = forwardedBody(seen[1]!);
    expect(sent.previous_response_id).toBeUndefined();
    expect(sent.input.map((item) => item.content)).toEqual([said("one"), [{ type: "output_text", text: "answer 1" }], said("two")]);

    const third = await respond(tenant, { input: "three", previous_response_id: secondBody.id });
    expect(programHeader(third)).toBe(programId);
    await drain();
    expect(forwardedBody(seen[2]!).input.map((item) => item.content)).toEqual([
      said("one"),
      [{ type: "output_text", text: "answer 1" }],
      said("two"),
      [{ type: "output_text", text: "answer 2" }],
      said("three"),
    ]);
    expect((await usageRows(programId)).map((r) => r.api)).toEqual(["responses", "responses", "responses"]);
  });

  it("answers 404 previous_response_not_found for an unknown, malformed, unstored or another tenant's response", async () => {
    mockPool((f) => new Response(JSON.stringify(responseFor(f, "x")), { headers: statsHeaders(stats) }));
    const tenant = await newTenant();
    const other = await newTenant();
    const unstored = (await (await respond(tenant, { input: "x", store: false })).json()) as { id: string };
    const stored = (await (await respond(tenant, { input: "x" })).json()) as { id: string };
    await drain();
    const cases: [TestTenant, string][] = [
      [tenant, "resp_nope"],
      [tenant, responseIdFor("prog_abcdefgh12345678", "call_x1")],
      [tenant, unstored.id],
      [other, stored.id],
    ];
    for (const [who, id] of cases) {
      const refused = await expectOpenAIError(await respond(who, { input: "y", previous_response_id: id }), 404, "invalid_request_error");
      expect(refused.error).toMatchObject({ code: "previous_response_not_found", param: "previous_response_id" });
    }
    expect((await respond(tenant, { input: "y", previous_response_id: stored.id })).status).toBe(200);
    await drain();
  });

  it("keeps a streamed response from its last event, and bills that event's usage", async () => {
    const seen = mockPool((f) => {
      const response = responseFor(f, "streamed");
      if (forwardedBody(f).input.length === 1) {
        const events = [
          formatResponsesEvent({ type: "response.created", sequence_number: 0, response: { ...response, status: "in_progress", output: [], usage: undefined } as never }),
          formatResponsesEvent({ type: "response.output_text.delta", sequence_number: 1, item_id: "m", output_index: 0, content_index: 0, delta: "streamed", logprobs: [] } as never),
          formatResponsesEvent({ type: "response.completed", sequence_number: 2, response } as never),
          statsCommentEvent(stats),
        ];
        return sseResponse(events);
      }
      return new Response(JSON.stringify(response), { headers: statsHeaders(stats) });
    });
    const tenant = await newTenant();
    const res = await respond(tenant, { input: "go", stream: true });
    const text = await res.text();
    expect(text).toContain("event: response.completed");
    expect(text).not.toContain("agentix");
    await drain();
    const programId = programHeader(res)!;
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ api: "responses", status: "ok", completion_tokens: 3 })]);
    const responseId = responseIdFor(programId, seen[0]!.request.headers.get(Header.call)!);
    const next = await respond(tenant, { input: "again", previous_response_id: responseId });
    expect(next.status).toBe(200);
    expect(forwardedBody(seen[1]!).input.map((i) => i.content)).toEqual([said("go"), [{ type: "output_text", text: "streamed" }], said("again")]);
    await drain();
  });

  it("reads an engine's native response (a reasoning item, usage without cache_write_tokens): billed, stored without the reasoning, continued", async () => {
    const seen = mockPool((f) => {
      const response = responseFor(f, "native");
      const native = {
        ...response,
        output: [{ id: "rs_1", type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "hmm" }] }, ...response.output],
        usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 4 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 1 }, total_tokens: 13 },
      };
      return new Response(JSON.stringify(native), { headers: statsHeaders(stats) });
    });
    const tenant = await newTenant();
    const first = await respond(tenant, { input: "go" });
    const { id } = (await first.json()) as { id: string };
    await drain();
    const programId = programHeader(first)!;
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "ok", prompt_tokens: 10, cached_tokens: 4, completion_tokens: 3 })]);
    const next = await respond(tenant, { input: "again", previous_response_id: id });
    expect(next.status).toBe(200);
    expect(programHeader(next)).toBe(programId);
    expect(forwardedBody(seen[1]!).input.map((i) => i.content)).toEqual([said("go"), [{ type: "output_text", text: "native" }], said("again")]);
    await drain();
  });
});
