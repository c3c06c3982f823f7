import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import { PROGRAM_ID } from "../../src/protocol/ids";
import { POOL_PATHS, verifyForward } from "../../src/protocol/signing";
import {
  addPools,
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  gate,
  mockPool,
  newTenant,
  POOL_CHAT_URL,
  poolJson,
  programHeader,
  programRow,
  CALL_ROUTE,
  EVENTS_ROUTE,
  edge,
  POOL_KEYS,
  SIGNING_SECRET,
  tenantFetch,
  testPool,
  usageRows,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("POST /v1/chat/completions (non-streaming)", () => {
  it("forwards the allowed body with its limit set, signed, and relays the pool's JSON", async () => {
    const pool = mockPool(() => poolJson({ content: "Hi there", usage: { prompt: 20, completion: 4, cached: 8 } }));
    const tenant = await newTenant(2.5);
    // Odd spacing and key order: the pool gets the re-serialised request with the plan's default limit (free: 1,024).
    const body = '{ "messages": [{"role":"user","content":"héllo"}],   "model":"test-model" }';
    const res = await chat(tenant, body, { [Header.thread]: "planner" });

    expect(res.status).toBe(200);
    const programId = programHeader(res);
    expect(programId).toMatch(PROGRAM_ID);
    const completion = (await res.json()) as { choices: { message: { content: string } }[]; usage: unknown };
    expect(completion.choices[0]?.message.content).toBe("Hi there");
    expect(completion.usage).toMatchObject({ prompt_tokens: 20, completion_tokens: 4 });
    expect(res.headers.get(Header.serviceMs)).toBeNull(); // pool stats stay internal

    expect(pool).toHaveLength(1);
    const forwarded = pool[0]!;
    expect(forwarded.request.url).toBe(POOL_CHAT_URL);
    expect(forwarded.request.method).toBe("POST");
    expect(JSON.parse(new TextDecoder().decode(forwarded.body))).toEqual({ ...JSON.parse(body), max_tokens: 1_024 });
    const h = forwarded.request.headers;
    expect(h.get(Header.tenant)).toBe(tenant.id);
    expect(h.get(Header.program)).toBe(programId);
    expect(h.get(Header.thread)).toBe("planner");
    expect(h.get(Header.call)).toMatch(/^call_/);
    expect(h.get(Header.serviceMs)).toBe("0");
    expect(h.get(Header.pathMs)).toBe("0");
    expect(h.get(Header.waitMs)).toBe("0");
    expect(h.get(Header.engine)).toBe("");
    expect(h.get(Header.weight)).toBe("2.5");
    expect(h.get(Header.keyId)).toBe("default");
    const window = { now: Date.now(), windowMs: 60_000 };
    const verified = await verifyForward(POOL_KEYS, CALL_ROUTE, h, forwarded.body, window);
    expect(verified).toMatchObject({ ok: true, keyId: "default", fields: { tenant: tenant.id, program: programId, thread: "planner" } });
    const forged = await verifyForward([{ id: "default", secret: "another-secret-entirely" }], CALL_ROUTE, h, forwarded.body, window);
    expect(forged.ok).toBe(false);
    // Bound to the route: it does not pass as a tool-event batch.
    expect((await verifyForward(POOL_KEYS, EVENTS_ROUTE, h, forwarded.body, window)).ok).toBe(false);

    await drain();
    const rows = await usageRows(programId!);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      call_id: h.get(Header.call),
      tenant_id: tenant.id,
      thread: "planner",
      model: "test-model",
      engine: "engine-a",
      prompt_tokens: 20,
      cached_tokens: 8,
      completion_tokens: 4,
      service_ms: 100,
      queue_ms: 5,
      status: "ok",
    });
  });

  it("signs with the key the pool's directory row names and signs the API path, not the pool URL's base path", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    await addPools(testPool({ id: "behind-proxy", url: "http://pool.test/behind/a/proxy", models: ["proxied-model"], signing_key_id: "edge-key.2" }));
    const bindings = { ...env, POOL_SIGNING_KEYS: JSON.stringify({ "edge-key.2": SIGNING_SECRET }) };
    const res = await edge(
      "/v1/chat/completions",
      { method: "POST", body: chatBody({ model: "proxied-model" }), headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" } },
      bindings,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.pool)).toBe("behind-proxy");
    const forwarded = pool[0]!;
    expect(forwarded.request.url).toBe(`http://pool.test/behind/a/proxy${POOL_PATHS.chatCompletions}`);
    const h = forwarded.request.headers;
    expect(h.get(Header.keyId)).toBe("edge-key.2");
    const window = { now: Date.now(), windowMs: 60_000 };
    // A pool in rotation holds the edge's key beside another one.
    const poolKeys = [{ id: "edge-key.1", secret: "the-key-before-this-one" }, { id: "edge-key.2", secret: SIGNING_SECRET }];
    expect(await verifyForward(poolKeys, CALL_ROUTE, h, forwarded.body, window)).toMatchObject({ ok: true, keyId: "edge-key.2" });
    // A pool that does not hold the key refuses it by name, the same secret under another ID notwithstanding.
    expect(await verifyForward(POOL_KEYS, CALL_ROUTE, h, forwarded.body, window)).toEqual({ ok: false, reason: "unknown signing key" });
    await drain();
  });

  it("creates a program when the header is absent and reuses it when present", async () => {
    const pool = mockPool(() => poolJson({ stats: { engine: "engine-b", queueMs: 7, serviceMs: 250.4 } }));
    const tenant = await newTenant();
    const first = await chat(tenant);
    const programId = programHeader(first)!;
    await drain();
    expect(await programRow(programId)).toMatchObject({ tenant_id: tenant.id, status: "active" });

    const second = await chat(tenant, chatBody(), { [Header.program]: programId });
    expect(programHeader(second)).toBe(programId);
    await drain();
    const h = pool[1]!.request.headers;
    expect(h.get(Header.program)).toBe(programId);
    // Whole milliseconds on the wire; the program keeps the exact figure.
    expect(h.get(Header.serviceMs)).toBe("250");
    expect(h.get(Header.pathMs)).toBe("250");
    expect(h.get(Header.waitMs)).toBe("7");
    expect(h.get(Header.engine)).toBe("engine-b");

    const third = await chat(tenant);
    expect(programHeader(third)).not.toBe(programId);
    await drain();
  });

  it("forks threads only off a parent that exists", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const first = await chat(tenant);
    const programId = programHeader(first)!;
    await drain();

    const orphan = await chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: "branch-1", [Header.parentThread]: "nope" });
    const orphanError = await expectOpenAIError(orphan, 400, "invalid_request_error");
    expect(orphanError.error.param).toBe(Header.parentThread);

    const fork = await chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: "branch-1", [Header.parentThread]: "main" });
    expect(fork.status).toBe(200);
    await drain();

    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as {
      threads: { name: string; parent: string | null; calls: number }[];
    };
    expect(state.threads).toEqual([
      expect.objectContaining({ name: "main", parent: null, calls: 1 }),
      expect.objectContaining({ name: "branch-1", parent: "main", calls: 1 }),
    ]);

    const badName = await chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: "has space" });
    expect((await expectOpenAIError(badName, 400)).error.param).toBe(Header.thread);
  });

  it("relays pool errors with their status, OpenAI body and Retry-After, and settles them as errors", async () => {
    const tenant = await newTenant();
    mockPool(
      () =>
        new Response(
          JSON.stringify({ error: { message: "Pool is full", type: "rate_limit_error", code: "pool_full", param: null } }),
          { status: 429, headers: { "content-type": "application/json", "retry-after": "3" } },
        ),
    );
    const res = await chat(tenant);
    const body = await expectOpenAIError(res, 429, "rate_limit_error");
    expect(body.error.code).toBe("pool_full");
    expect(res.headers.get("retry-after")).toBe("3");
    const programId = programHeader(res)!;
    expect(programId).toMatch(PROGRAM_ID);
    await drain();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ status: "error", prompt_tokens: 0, completion_tokens: 0 }),
    ]);
  });

  it("wraps a pool error that is not in OpenAI's shape", async () => {
    const tenant = await newTenant();
    mockPool(() => new Response("upstream exploded", { status: 503 }));
    const res = await chat(tenant);
    const body = await expectOpenAIError(res, 503, "server_error");
    // The pool's own words stay in the log; the tenant gets a fixed message naming the request.
    expect(body.error.message).not.toContain("upstream exploded");
    expect(body.error).toMatchObject({ code: "pool_error" });
    expect(body.error.message).toContain(res.headers.get(Header.requestId)!);
    await drain();
  });

  it("answers 502 when the pool refuses the edge's signature, so clients do not blame their key", async () => {
    const tenant = await newTenant();
    mockPool(
      () =>
        new Response(JSON.stringify({ error: { message: "bad signature", type: "authentication_error", code: null, param: null } }), {
          status: 401,
        }),
    );
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const body = await expectOpenAIError(await chat(tenant), 502, "server_error");
    expect(body.error.code).toBe("pool_rejected_edge");
    expect(logged).toHaveBeenCalledWith(expect.stringContaining("POOL_SIGNING_SECRET"));
    await drain();
  });

  it("answers 502 in OpenAI's shape when the pool is unreachable, and settles the call as an error", async () => {
    const tenant = await newTenant();
    vi.spyOn(globalThis, "fetch").mockImplementation(async () => {
      throw new TypeError("Network connection lost.");
    });
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const warned = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const res = await chat(tenant);
    expect(warned).toHaveBeenCalledWith(expect.stringContaining("pool pool-test could not be reached"), expect.any(TypeError));
    expect(logged).toHaveBeenCalledWith(expect.stringContaining("no pool could be reached"));
    const body = await expectOpenAIError(res, 502, "server_error");
    expect(body.error.code).toBe("pool_unreachable");
    const programId = programHeader(res)!;
    await drain();
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "error", service_ms: 0 })]);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as Record<string, unknown>;
    expect(state).toMatchObject({ in_flight: 0, totals: expect.objectContaining({ calls: 1 }) });
  });

  it("passes the client's abort to the pool and settles the call as cancelled", async () => {
    const tenant = await newTenant();
    const arrived = gate();
    const pool = mockPool(
      ({ signal }) =>
        new Promise<Response>((_resolve, reject) => {
          arrived.open();
          signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
        }),
    );
    const client = new AbortController();
    const pending = chat(tenant, chatBody(), {}, { signal: client.signal });
    await arrived.promise;
    expect(pool[0]!.signal?.aborted).toBe(false);
    client.abort();
    const res = await pending;
    expect(pool[0]!.signal?.aborted).toBe(true);
    const programId = programHeader(res)!;
    await drain();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ status: "cancelled", prompt_tokens: 0, completion_tokens: 0 }),
    ]);
  });
});
