import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { AnthropicHeader, Header } from "../../src/protocol/headers";
import { adminFetch, chat, chatBody, chunk, drain, edge, mockPool, newTenant, poolJson, programHeader, sseResponse, type TestTenant, tenantFetch, usageObject } from "./support";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";
import { statsCommentEvent, statsHeaders } from "../../src/protocol/stats";

/*
 * Issue 12: calls without x-agentix-program join their program by their conversation
 * (recognition/program-index.ts): a continuation of an earlier reply, a fork, a retry
 * of a failed call; never two agents merged on identical first messages.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const SYSTEM = { role: "system", content: "You are a coding agent." };
const USER = { role: "user", content: "Fix the failing test." };
const source = (res: Response) => res.headers.get(Header.programSource);

/** A fake pool answering each call with the next reply of `replies` (text, or a tool call). */
function replying(...replies: (string | { tool: string; args: string })[]) {
  let n = 0;
  return mockPool(() => {
    const r = replies[Math.min(n++, replies.length - 1)];
    if (typeof r === "string") return poolJson({ content: r });
    const body = {
      id: `chatcmpl-${n}`,
      object: "chat.completion",
      created: 1,
      model: "test-model",
      choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [{ id: `call_${n}`, type: "function", function: { name: r!.tool, arguments: r!.args } }] }, finish_reason: "tool_calls" }],
      usage: usageObject({ prompt: 10, completion: 5 }),
    };
    return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...statsHeaders({ engine: "e", queueMs: 1, serviceMs: 5 }) } });
  });
}

async function call(tenant: TestTenant, messages: unknown[], extra: Record<string, unknown> = {}): Promise<Response> {
  const res = await chat(tenant, chatBody({ messages, ...extra }));
  await drain();
  return res;
}

describe("programs recognised by their conversation", () => {
  it("follows an agent loop without any header: each call continues the program its history's reply came from", async () => {
    replying({ tool: "bash", args: '{"cmd":"npm test"}' }, "The test expects 3; fixing.", "Done.");
    const tenant = await newTenant();
    const first = await call(tenant, [SYSTEM, USER]);
    expect(source(first)).toBe("new");
    const programId = programHeader(first)!;
    const toolTurn = { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "bash", arguments: '{"cmd": "npm test"}' } }] };
    const second = await call(tenant, [SYSTEM, USER, toolTurn, { role: "tool", tool_call_id: "call_1", content: "1 failing" }]);
    expect([programHeader(second), source(second)]).toEqual([programId, "continuation"]);
    const third = await call(tenant, [
      SYSTEM,
      USER,
      toolTurn,
      { role: "tool", tool_call_id: "call_1", content: "1 failing" },
      { role: "assistant", content: "The test expects 3; fixing." },
      { role: "user", content: "go on" },
    ]);
    expect([programHeader(third), source(third)]).toEqual([programId, "continuation"]);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { totals: { calls: number } };
    expect(state.totals.calls).toBe(3);
  });

  it("links a streamed reply too", async () => {
    const events = [dataEvent(chunk("Looking")), dataEvent(chunk(" now.")), dataEvent(chunk(null, { usage: usageObject({ prompt: 5, completion: 2 }) })), statsCommentEvent({ engine: "e", queueMs: 1, serviceMs: 5 }), formatEvent(DONE_EVENT)];
    mockPool(() => sseResponse(events));
    const tenant = await newTenant();
    const first = await chat(tenant, chatBody({ messages: [SYSTEM, USER], stream: true }));
    await first.text();
    await drain();
    const next = await chat(tenant, chatBody({ messages: [SYSTEM, USER, { role: "assistant", content: "Looking now." }, { role: "user", content: "ok" }], stream: true }));
    expect([programHeader(next), source(next)]).toEqual([programHeader(first), "continuation"]);
    await next.text();
    await drain();
  });

  it("keeps two agents with identical first messages apart, and makes a second expansion of one reply a fork", async () => {
    replying("Plan A.", "Plan B.", "child", "child", "child");
    const tenant = await newTenant();
    const a = await call(tenant, [SYSTEM, USER]);
    const b = await call(tenant, [SYSTEM, USER]);
    expect(programHeader(a)).not.toBe(programHeader(b));
    expect([source(a), source(b)]).toEqual(["new", "new"]);
    const node = [SYSTEM, USER, { role: "assistant", content: "Plan A." }];
    const c1 = await call(tenant, [...node, { role: "user", content: "try 1" }]);
    const c2 = await call(tenant, [...node, { role: "user", content: "try 2" }]);
    expect([programHeader(c1), programHeader(c2)]).toEqual([programHeader(a), programHeader(a)]);
    expect([source(c1), source(c2)]).toEqual(["continuation", "fork"]);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programHeader(a)}`)).json()) as { threads: { name: string; parent: string | null }[] };
    expect(state.threads).toEqual(expect.arrayContaining([expect.objectContaining({ name: "main.1", parent: "main" })]));
  });

  it("treats the resend of a failed call as its retry, in its program", async () => {
    let n = 0;
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    mockPool(() => (n++ === 0 ? new Response(JSON.stringify({ error: { message: "bad", type: "server_error", code: "engine_error", param: null } }), { status: 500 }) : poolJson()));
    const tenant = await newTenant();
    const failed = await call(tenant, [SYSTEM, { role: "user", content: "unique task 17" }]);
    expect(failed.status).toBe(500);
    const retried = await call(tenant, [SYSTEM, { role: "user", content: "unique task 17" }]);
    expect([retried.status, programHeader(retried), source(retried)]).toEqual([200, programHeader(failed), "retry"]);
  });

  it("recognises an Anthropic client's tool loop", async () => {
    let n = 0;
    mockPool(() => {
      n += 1;
      const content = n === 1 ? [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }] : [{ type: "text", text: "Two files." }];
      const body = { id: `msg_${n}`, type: "message", role: "assistant", model: "test-model", content, stop_reason: n === 1 ? "tool_use" : "end_turn", stop_sequence: null, usage: { input_tokens: 5, output_tokens: 3 } };
      return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...statsHeaders({ engine: "e", queueMs: 1, serviceMs: 5 }) } });
    });
    const tenant = await newTenant();
    const send = (messages: unknown[]) =>
      edge("/v1/messages", {
        method: "POST",
        body: JSON.stringify({ model: "test-model", max_tokens: 20, system: "Be brief.", messages }),
        headers: { [AnthropicHeader.apiKey]: tenant.key, "content-type": "application/json" },
      });
    const first = await send([{ role: "user", content: "List the files." }]);
    await drain();
    const second = await send([
      { role: "user", content: "List the files." },
      { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "a b" }] },
    ]);
    await drain();
    expect([programHeader(second), source(second)]).toEqual([programHeader(first), "continuation"]);
  });

  it("joins calls by an identifier the client sends per session: Anthropic's metadata.user_id, a configured header, OpenAI's prompt_cache_key", async () => {
    mockPool(() =>
      new Response(
        JSON.stringify({ id: "msg_1", type: "message", role: "assistant", model: "test-model", content: [{ type: "text", text: "ok" }], stop_reason: "end_turn", stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } }),
        { headers: { "content-type": "application/json", ...statsHeaders({ engine: "e", queueMs: 1, serviceMs: 5 }) } },
      ),
    );
    const tenant = await newTenant();
    const message = (text: string, userId: string) =>
      edge("/v1/messages", {
        method: "POST",
        body: JSON.stringify({ model: "test-model", max_tokens: 8, metadata: { user_id: userId }, messages: [{ role: "user", content: text }] }),
        headers: { [AnthropicHeader.apiKey]: tenant.key, "content-type": "application/json" },
      });
    const a1 = await message("first task", "user_x_session_1");
    await drain();
    const a2 = await message("an unrelated question", "user_x_session_1");
    await drain();
    const b1 = await message("an unrelated question", "user_x_session_2");
    await drain();
    expect([source(a1), source(a2), source(b1)]).toEqual(["new", "session_key", "new"]);
    expect(programHeader(a2)).toBe(programHeader(a1));
    expect(programHeader(b1)).not.toBe(programHeader(a1));

    // Its program ended: the session's next call starts a new program, and the session follows it.
    expect((await tenantFetch(tenant, `/v1/programs/${programHeader(a1)}`, { method: "DELETE" })).status).toBe(200);
    const a3 = await message("again", "user_x_session_1");
    await drain();
    const a4 = await message("and again", "user_x_session_1");
    await drain();
    expect(programHeader(a3)).not.toBe(programHeader(a1));
    expect([programHeader(a4), source(a4)]).toEqual([programHeader(a3), "session_key"]);

    const withHeader = { ...env, PROGRAM_KEY_HEADER: "X-Session-Id" };
    const byHeader = (text: string, id: string) =>
      edge("/v1/chat/completions", { method: "POST", body: chatBody({ messages: [{ role: "user", content: text }] }), headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", "x-session-id": id } }, withHeader);
    mockPool(() => poolJson());
    const h1 = await byHeader("one", "s-77");
    await drain();
    const h2 = await byHeader("two", "s-77");
    await drain();
    expect([programHeader(h2), source(h2)]).toEqual([programHeader(h1), "session_key"]);

    // OpenAI's prompt_cache_key on chat completions: one conversation's key, one program; another key, another.
    const keyed = (text: string, key: string) => call(tenant, [{ role: "user", content: text }], { prompt_cache_key: key });
    const k1 = await keyed("first", "conv-a");
    const k2 = await keyed("unrelated", "conv-a");
    const k3 = await keyed("unrelated", "conv-b");
    expect([source(k1), source(k2), source(k3)]).toEqual(["new", "session_key", "new"]);
    expect(programHeader(k2)).toBe(programHeader(k1));
    expect(programHeader(k3)).not.toBe(programHeader(k1));
  });

  it("recognises a Responses client that keeps its own history (store: false, as Codex does) by the output items it replays", async () => {
    let n = 0;
    mockPool(() => {
      n += 1;
      const output =
        n === 1
          ? [{ id: "fc_a_0", type: "function_call", call_id: "call_a", name: "shell", arguments: '{"command":["ls"]}', status: "completed" }]
          : [{ id: `msg_${n}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Two files.", annotations: [] }] }];
      const body = { id: `resp_x${n}`, object: "response", created_at: 1, status: "completed", model: "test-model", output, usage: { input_tokens: 5, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 7 } };
      return new Response(JSON.stringify(body), { headers: { "content-type": "application/json", ...statsHeaders({ engine: "e", queueMs: 1, serviceMs: 5 }) } });
    });
    const tenant = await newTenant();
    const respond = (input: unknown[]) =>
      edge("/v1/responses", {
        method: "POST",
        body: JSON.stringify({ model: "test-model", instructions: "You are Codex.", input, store: false, include: ["reasoning.encrypted_content"] }),
        headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" },
      });
    const ask = { type: "message", role: "user", content: [{ type: "input_text", text: "List the files." }] };
    const first = await respond([ask]);
    expect(first.status).toBe(200);
    await drain();
    // The client replays the function call item as it received it, with its output.
    const second = await respond([
      ask,
      { type: "function_call", id: "fc_a_0", call_id: "call_a", name: "shell", arguments: '{"command": ["ls"]}', status: "completed" },
      { type: "function_call_output", call_id: "call_a", output: "a.ts b.ts" },
    ]);
    await drain();
    expect([second.status, programHeader(second), source(second)]).toEqual([200, programHeader(first), "continuation"]);
  });

  it("starts a new program when the tenant turned inference off, or when the linked program has ended", async () => {
    replying("Reply one.");
    const tenant = await newTenant();
    const first = await call(tenant, [SYSTEM, USER]);
    const continued = [SYSTEM, USER, { role: "assistant", content: "Reply one." }, { role: "user", content: "next" }];
    expect((await tenantFetch(tenant, `/v1/programs/${programHeader(first)}`, { method: "DELETE" })).status).toBe(200);
    const afterEnd = await call(tenant, continued);
    expect(afterEnd.status).toBe(200);
    expect(programHeader(afterEnd)).not.toBe(programHeader(first));
    expect(source(afterEnd)).toBe("new");

    const off = await newTenant();
    expect((await adminFetch(`/admin/tenants/${off.id}`, { method: "PATCH", body: JSON.stringify({ program_inference: false }) })).status).toBe(200);
    const one = await call(off, [SYSTEM, USER]);
    const two = await call(off, continued);
    expect(programHeader(one)).not.toBe(programHeader(two));
    expect(source(two)).toBe("new");
  });
});
