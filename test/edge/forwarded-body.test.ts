import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { forwardBody } from "../../src/edge/chat/forward-body";
import { ChatCompletionRequest } from "../../src/protocol/chat";
import { Header } from "../../src/protocol/headers";
import { verifyForward } from "../../src/protocol/signing";
import {
  adminFetch,
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  mockPool,
  newLimitedTenant,
  newTenant,
  CALL_ROUTE,
  poolJson,
  POOL_KEYS,
  setOverrides,
  type ForwardedRequest,
} from "./support";

/*
 * Issue 9, items 1 and 3: the body the edge forwards is built from the parsed request
 * (OpenAI's fields and the plan's extensions only) with the call's effective
 * completion limit set, and the signature covers exactly those bytes.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const sent = (forwarded: ForwardedRequest | undefined): Record<string, unknown> =>
  JSON.parse(new TextDecoder().decode(forwarded?.body)) as Record<string, unknown>;

async function signatureCovers(forwarded: ForwardedRequest | undefined): Promise<boolean> {
  if (!forwarded) return false;
  const verified = await verifyForward(POOL_KEYS, CALL_ROUTE, forwarded.request.headers, forwarded.body, {
    now: Date.now(),
    windowMs: 60_000,
  });
  return verified.ok;
}

describe("the effective completion limit in the forwarded body", () => {
  it("is the plan default in max_tokens when the client set none, and the client's own in the field it used", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ default_max_tokens: 300, max_output_tokens: 2_000 });

    expect((await chat(tenant)).status).toBe(200);
    expect(sent(pool[0])).toMatchObject({ max_tokens: 300 });
    expect(sent(pool[0])).not.toHaveProperty("max_completion_tokens");

    expect((await chat(tenant, chatBody({ max_completion_tokens: 50 }))).status).toBe(200);
    expect(sent(pool[1])).toMatchObject({ max_completion_tokens: 50 });
    expect(sent(pool[1])).not.toHaveProperty("max_tokens");

    expect((await chat(tenant, chatBody({ max_tokens: 70 }))).status).toBe(200);
    expect(sent(pool[2])).toMatchObject({ max_tokens: 70 });
    expect(sent(pool[2])).not.toHaveProperty("max_completion_tokens");

    // Both sent: max_completion_tokens decides, and both carry it so any engine reads the same limit.
    expect((await chat(tenant, chatBody({ max_tokens: 900, max_completion_tokens: 40 }))).status).toBe(200);
    expect(sent(pool[3])).toMatchObject({ max_tokens: 40, max_completion_tokens: 40 });

    // An explicit null is "none": the default, in max_tokens.
    expect((await chat(tenant, chatBody({ max_completion_tokens: null }))).status).toBe(200);
    expect(sent(pool[4])).toEqual({ model: "test-model", messages: [{ role: "user", content: "Say hello." }], max_tokens: 300 });

    for (const forwarded of pool) expect(await signatureCovers(forwarded)).toBe(true);
    await drain();
  });

  it("never exceeds the plan's maximum: the default is capped, a larger request is 400 naming its field", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ default_max_tokens: 1_000, max_output_tokens: 256 });

    expect((await chat(tenant)).status).toBe(200);
    expect(sent(pool[0])).toMatchObject({ max_tokens: 256 });
    expect((await chat(tenant, chatBody({ max_tokens: 256 }))).status).toBe(200);

    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const res = await chat(tenant, chatBody({ [field]: 257 }));
      const error = await expectOpenAIError(res, 400, "invalid_request_error");
      expect(error.error).toMatchObject({ param: field, code: "max_tokens_above_plan_limit" });
      expect(error.error.message).toContain(field);
      expect(error.error.message).toContain("256");
    }
    expect(pool).toHaveLength(2);

    // A tenant override moves the maximum; null goes back to the plan's (free: 8,192).
    await setOverrides(tenant, { max_output_tokens: 9_000 });
    expect((await chat(tenant, chatBody({ max_tokens: 8_500 }))).status).toBe(200);
    expect(sent(pool[2])).toMatchObject({ max_tokens: 8_500 });
    await setOverrides(tenant, { max_output_tokens: null });
    expect((await expectOpenAIError(await chat(tenant, chatBody({ max_tokens: 8_500 })), 400)).error.message).toContain("8192");
    await drain();
  });

  it("is what admission reserved: the tokens header shows prompt estimate + that limit taken", async () => {
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ tpm: 100_000, default_max_tokens: 700, max_output_tokens: 500 });
    const res = await chat(tenant);
    expect(res.status).toBe(200);
    const remaining = Number(res.headers.get("x-ratelimit-remaining-tokens"));
    // "Say hello." estimates to a few tokens; the reservation is those + 500 (the default capped to the maximum), not + 700.
    expect(100_000 - remaining).toBeGreaterThan(500);
    expect(100_000 - remaining).toBeLessThan(520);
    await drain();
  });
});

describe("the allow-list", () => {
  it("refuses engine extensions with 400 naming the field, before any state is touched", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const cases: [Record<string, unknown>, string][] = [
      [{ min_tokens: 500 }, "min_tokens"],
      [{ ignore_eos: true }, "ignore_eos"],
      [{ kv_transfer_params: { do_remote_prefill: true } }, "kv_transfer_params"],
      [{ lora_request: { lora_name: "x" } }, "lora_request"],
      [{ priority: -100 }, "priority"],
      [{ service_tier: "priority" }, "service_tier"],
      [{ messages: [{ role: "user", content: "hi", cache_salt: "x" }] }, "messages.0.cache_salt"],
      [{ messages: [{ role: "user", content: "a" }, { role: "assistant", content: "b", reasoning_content: "c" }] }, "messages.1.reasoning_content"],
      [{ stream_options: { include_usage: true, continuous_usage_stats: true } }, "stream_options.continuous_usage_stats"],
    ];
    for (const [fields, param] of cases) {
      const res = await chat(tenant, chatBody(fields));
      const error = await expectOpenAIError(res, 400, "invalid_request_error");
      expect(error.error.param).toBe(param);
      expect(error.error.message).toContain(param);
      expect(res.headers.get(Header.program)).toBeNull();
    }
    expect(pool).toHaveLength(0);
    const programs = await env.DB.prepare("SELECT COUNT(*) AS n FROM programs WHERE tenant_id = ?").bind(tenant.id).first<{ n: number }>();
    expect(programs?.n).toBe(0);
  });

  it("forwards OpenAI's fields, typed, and nothing the client added", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const openAI = {
      temperature: 0.2,
      top_p: 0.9,
      n: 1,
      stop: ["\n\n"],
      seed: 7,
      frequency_penalty: 0.5,
      presence_penalty: -0.5,
      logit_bias: { "50256": -100 },
      logprobs: true,
      top_logprobs: 3,
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" } } },
      reasoning_effort: "low",
      tools: [{ type: "function", function: { name: "bash", parameters: { type: "object" }, strict: true } }],
      tool_choice: "auto",
      parallel_tool_calls: false,
      user: "u-1",
      metadata: { run: "42" },
      store: false,
      stream_options: null,
      max_tokens: 64,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "hi" }], name: "ann" },
        { role: "assistant", content: null, refusal: null, tool_calls: [{ id: "c1", type: "function", function: { name: "bash", arguments: "{}" } }] },
        { role: "tool", content: "ok", tool_call_id: "c1" },
      ],
    };
    expect((await chat(tenant, chatBody(openAI))).status).toBe(200);
    expect(sent(pool[0])).toEqual({ model: "test-model", ...openAI });
    expect(await signatureCovers(pool[0])).toBe(true);

    const wrongType = await chat(tenant, chatBody({ top_logprobs: 50 }));
    expect((await expectOpenAIError(wrongType, 400)).error.param).toBe("top_logprobs");
    await drain();
  });

  it("forwards the extensions the tenant's plan allows, and only those", async () => {
    const pool = mockPool(() => poolJson());
    const plan = await adminFetch("/admin/plans", {
      method: "POST",
      body: JSON.stringify({
        id: "engine-extras",
        name: "Engine extras",
        rpm: 100,
        tpm: 100_000,
        max_concurrent: 4,
        max_active_programs: 100,
        monthly_token_budget: null,
        default_max_tokens: 128,
        max_output_tokens: 1_024,
        allowed_extensions: ["min_tokens", "messages.reasoning_content", "min_tokens"],
      }),
    });
    expect(plan.status).toBe(201);
    expect(await plan.json()).toMatchObject({ allowed_extensions: ["messages.reasoning_content", "min_tokens"] });
    const tenant = await newTenant();
    const moved = await adminFetch(`/admin/tenants/${tenant.id}`, { method: "PATCH", body: JSON.stringify({ plan: "engine-extras" }) });
    expect(moved.status).toBe(200);

    const messages = [
      { role: "user", content: "a" },
      { role: "assistant", content: "b", reasoning_content: "thinking" },
      { role: "user", content: "c" },
    ];
    expect((await chat(tenant, chatBody({ min_tokens: 5, messages }))).status).toBe(200);
    expect(sent(pool[0])).toEqual({ model: "test-model", messages, min_tokens: 5, max_tokens: 128 });
    expect(await signatureCovers(pool[0])).toBe(true);
    // Not on the list.
    expect((await expectOpenAIError(await chat(tenant, chatBody({ ignore_eos: true })), 400)).error.param).toBe("ignore_eos");

    // A tenant's list replaces the plan's; an empty one allows none; null goes back to the plan's.
    await setOverrides(tenant, { allowed_extensions: ["ignore_eos"] });
    expect((await chat(tenant, chatBody({ ignore_eos: true }))).status).toBe(200);
    expect(sent(pool[1])).toMatchObject({ ignore_eos: true });
    await expectOpenAIError(await chat(tenant, chatBody({ min_tokens: 5 })), 400);
    await setOverrides(tenant, { allowed_extensions: [] });
    await expectOpenAIError(await chat(tenant, chatBody({ ignore_eos: true })), 400);
    await setOverrides(tenant, { allowed_extensions: null });
    expect((await chat(tenant, chatBody({ min_tokens: 5 }))).status).toBe(200);
    expect(pool).toHaveLength(3);
    await drain();
  });

  it("takes only valid extension names in the admin API", async () => {
    const tenant = await newTenant();
    const cases: [unknown, string][] = [
      [["bad name"], "allowed_extensions.0"],
      [["temperature"], "allowed_extensions.0"],
      [["messages.content"], "allowed_extensions.0"],
      [["min_tokens", "priority"], "allowed_extensions.1"],
      ["min_tokens", "allowed_extensions"],
    ];
    for (const [value, param] of cases) {
      const res = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, {
        method: "PATCH",
        body: JSON.stringify({ allowed_extensions: value }),
      });
      expect((await expectOpenAIError(res, 400)).error.param).toBe(param);
    }
  });
});

describe("forwardBody", () => {
  const parse = (body: Record<string, unknown>) =>
    ChatCompletionRequest.parse({ model: "m", messages: [{ role: "user", content: "x" }], ...body });
  const decode = (bytes: Uint8Array) => JSON.parse(new TextDecoder().decode(bytes)) as Record<string, unknown>;

  it("sets the limit in the field the client used, max_tokens when none, both when both", () => {
    expect(decode(forwardBody(parse({}), 10))).toMatchObject({ max_tokens: 10 });
    expect(decode(forwardBody(parse({ max_completion_tokens: 99 }), 10))).toEqual({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      max_completion_tokens: 10,
    });
    expect(decode(forwardBody(parse({ max_tokens: 99, max_completion_tokens: 10 }), 10))).toMatchObject({
      max_tokens: 10,
      max_completion_tokens: 10,
    });
    expect(decode(forwardBody(parse({ max_tokens: null, max_completion_tokens: null }), 3))).toEqual({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      max_tokens: 3,
    });
  });

  it("keeps prompt_cache_key at the edge (the call's session key), not in the engine's body", () => {
    expect(decode(forwardBody(parse({ prompt_cache_key: "conv-1", user: "u" }), 5))).toEqual({
      model: "m",
      messages: [{ role: "user", content: "x" }],
      user: "u",
      max_tokens: 5,
    });
  });
});
