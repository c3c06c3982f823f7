import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { expect, vi } from "vitest";
import { Header, RateLimitHeader } from "../../src/protocol/headers";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";
import { POOL_PATHS, type SignedRoute, type SigningKey } from "../../src/protocol/signing";
import { type PoolCallStats, statsCommentEvent, statsHeaders } from "../../src/protocol/stats";
import worker from "../../src/edge/index";
import { programSession } from "../../src/edge/program/access";
import type { SettleCallInput } from "../../src/edge/program/types";

/*
 * Test harness for the edge: calls the Worker in-process with an execution
 * context we can wait on (so settles queued with ctx.waitUntil are done before
 * assertions), admin shortcuts, and a fake pool behind vi.spyOn(fetch).
 */

/** As vitest.config.ts binds it: at least 32 characters, as the edge requires. */
export const ADMIN_TOKEN = "test-admin-token-0123456789abcdef";
export const SIGNING_SECRET = "test-signing-secret";
/** The key the edge signs with as vitest.config.ts binds it (no POOL_SIGNING_KEY_ID: "default"), as a pool would hold it. */
export const POOL_KEYS: SigningKey[] = [{ id: "default", secret: SIGNING_SECRET }];
/** What the pool verifies a forwarded call and a tool-event batch against. */
export const CALL_ROUTE: SignedRoute = { method: "POST", path: POOL_PATHS.chatCompletions };
export const EVENTS_ROUTE: SignedRoute = { method: "POST", path: POOL_PATHS.toolEvents };
export const POOL_CHAT_URL = "http://pool.test/v1/chat/completions";

const contexts: ExecutionContext[] = [];

/** Calls the Worker; its waitUntil work is awaited by `drain()`. */
export function edge(path: string, init: RequestInit = {}, bindings: Cloudflare.Env = env): Promise<Response> {
  const ctx = createExecutionContext();
  contexts.push(ctx);
  return Promise.resolve(worker.fetch(new Request(`http://edge.test${path}`, init), bindings, ctx));
}

/** Waits for every ctx.waitUntil promise of every call made so far. */
export async function drain(): Promise<void> {
  while (contexts.length > 0) {
    const ctx = contexts.shift();
    if (ctx) await waitOnExecutionContext(ctx);
  }
}

export function adminFetch(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${ADMIN_TOKEN}`);
  return edge(path, { ...init, headers });
}

export interface TestTenant {
  id: string;
  key: string;
  keyId: string;
}

let tenantCount = 0;

export async function newTenant(weight = 1): Promise<TestTenant> {
  tenantCount += 1;
  const created = await adminFetch("/admin/tenants", {
    method: "POST",
    body: JSON.stringify({ name: `tenant ${tenantCount}`, weight }),
  });
  expect(created.status).toBe(201);
  const tenant = (await created.json()) as { id: string };
  const keyRes = await adminFetch(`/admin/tenants/${tenant.id}/keys`, { method: "POST" });
  expect(keyRes.status).toBe(201);
  const key = (await keyRes.json()) as { id: string; key: string };
  await drain();
  return { id: tenant.id, key: key.key, keyId: key.id };
}

export function chatBody(overrides: Record<string, unknown> = {}): string {
  return JSON.stringify({
    model: "test-model",
    messages: [{ role: "user", content: "Say hello." }],
    ...overrides,
  });
}

export function chat(
  tenant: TestTenant,
  body: string = chatBody(),
  headers: Record<string, string> = {},
  init: RequestInit = {},
): Promise<Response> {
  return edge("/v1/chat/completions", {
    method: "POST",
    body,
    ...init,
    headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", ...headers },
  });
}

export function tenantFetch(tenant: TestTenant, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("authorization", `Bearer ${tenant.key}`);
  return edge(path, { ...init, headers });
}

export interface OpenAIError {
  error: { message: string; type: string; code: string | null; param: string | null };
}

/** Asserts an OpenAI-shaped error and returns it. */
export async function expectOpenAIError(res: Response, status: number, type?: string): Promise<OpenAIError> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as OpenAIError;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(typeof body.error.message).toBe("string");
  expect(body.error).toHaveProperty("code");
  expect(body.error).toHaveProperty("param");
  if (type) expect(body.error.type).toBe(type);
  return body;
}

// ---------------------------------------------------------------- fake pool

export interface ForwardedRequest {
  request: Request;
  body: ArrayBuffer;
  signal: AbortSignal | undefined;
}

export type PoolHandler = (forwarded: ForwardedRequest) => Response | Promise<Response>;

/**
 * Replaces global fetch with a fake pool. Each call builds a NEW Response (a
 * shared one would be read across requests). Returns what the edge sent.
 */
export function mockPool(handler: PoolHandler, status: (url: string) => Response = () => poolStatusResponse()): ForwardedRequest[] {
  const seen: ForwardedRequest[] = [];
  vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
    const request = new Request(input, init);
    // The pool monitor's status reads (its alarm runs in this isolate too) are not the test's traffic.
    if (new URL(request.url).pathname.endsWith(POOL_PATHS.status)) return status(request.url);
    const forwarded = { request, body: await request.clone().arrayBuffer(), signal: init?.signal ?? undefined };
    seen.push(forwarded);
    return handler(forwarded);
  });
  return seen;
}

/** A pool's `GET /v1/status` answer: healthy and idle unless told otherwise. */
export function poolStatusResponse(over: { healthy?: number; queued?: number; running?: number } = {}): Response {
  const healthy = over.healthy ?? 2;
  const body = {
    object: "pool.status",
    status: healthy > 0 ? "ok" : "degraded",
    models: null,
    engines: { total: 2, healthy },
    queue: { queued: over.queued ?? 0, running: over.running ?? 0, by_level: [over.queued ?? 0] },
    kv: { capacity_tokens: 100_000, free_tokens: 100_000 },
    at: Date.now(),
  };
  return new Response(JSON.stringify(body), { status: 200, headers: { "content-type": "application/json" } });
}

export interface Completion {
  content?: string;
  usage?: { prompt: number; completion: number; cached?: number };
  stats?: PoolCallStats;
}

export function usageObject(u: { prompt: number; completion: number; cached?: number }) {
  return {
    prompt_tokens: u.prompt,
    completion_tokens: u.completion,
    total_tokens: u.prompt + u.completion,
    prompt_tokens_details: { cached_tokens: u.cached ?? 0 },
  };
}

/** A pool's non-streaming answer: the engine's JSON with usage, stats in headers. */
export function poolJson(c: Completion = {}): Response {
  const body = {
    id: "chatcmpl-test",
    object: "chat.completion",
    created: 1_700_000_000,
    model: "test-model",
    choices: [{ index: 0, message: { role: "assistant", content: c.content ?? "Hello!" }, finish_reason: "stop" }],
    usage: usageObject(c.usage ?? { prompt: 12, completion: 3 }),
  };
  const stats = c.stats ?? { engine: "engine-a", queueMs: 5, serviceMs: 100 };
  return new Response(JSON.stringify(body), {
    status: 200,
    headers: { "content-type": "application/json", ...statsHeaders(stats) },
  });
}

export function chunk(content: string | null, extra: Record<string, unknown> = {}) {
  return {
    id: "chatcmpl-test",
    object: "chat.completion.chunk",
    created: 1_700_000_000,
    model: "test-model",
    choices: content === null ? [] : [{ index: 0, delta: { content }, finish_reason: null }],
    ...extra,
  };
}

/** The events a pool streams: content chunks, the usage-only chunk, its stats comment, [DONE]. */
export function poolSseEvents(parts: string[], c: Completion = {}): string[] {
  const stats = c.stats ?? { engine: "engine-a", queueMs: 5, serviceMs: 100 };
  return [
    ...parts.map((p) => dataEvent(chunk(p))),
    dataEvent(chunk(null, { usage: usageObject(c.usage ?? { prompt: 12, completion: parts.length }) })),
    statsCommentEvent(stats),
    formatEvent(DONE_EVENT),
  ];
}

export function sseResponse(events: string[] | ReadableStream<Uint8Array>): Response {
  const encoder = new TextEncoder();
  const body = Array.isArray(events)
    ? new ReadableStream<Uint8Array>({
        start(controller) {
          for (const e of events) controller.enqueue(encoder.encode(e));
          controller.close();
        },
      })
    : events;
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

export const programHeader = (res: Response) => res.headers.get(Header.program);

export async function usageRows(programId: string) {
  const { results } = await env.DB.prepare("SELECT * FROM usage WHERE program_id = ? ORDER BY started_at, call_id")
    .bind(programId)
    .all<Record<string, unknown>>();
  return results;
}

export async function programRow(programId: string) {
  return env.DB.prepare("SELECT * FROM programs WHERE id = ?").bind(programId).first<Record<string, unknown>>();
}

/** A promise with its resolver, to hold a fake pool's answer until the test lets it go. */
export function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

// ---------------------------------------------------------------- plans, limits, clock

export interface LimitOverrides {
  rpm?: number | null;
  tpm?: number | null;
  max_concurrent?: number | null;
  max_active_programs?: number | null;
  monthly_token_budget?: number | null;
  default_max_tokens?: number | null;
  max_output_tokens?: number | null;
  allowed_extensions?: string[] | null;
  tool_events_per_minute?: number | null;
  limiter_shards?: number | null;
}

/** Sets a tenant's limit overrides through the admin API. */
export async function setOverrides(tenant: TestTenant, overrides: LimitOverrides): Promise<void> {
  const res = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, {
    method: "PATCH",
    body: JSON.stringify(overrides),
  });
  expect(res.status).toBe(200);
}

/** A tenant with these overrides (on the default plan otherwise). */
export async function newLimitedTenant(overrides: LimitOverrides): Promise<TestTenant> {
  const tenant = await newTenant();
  await setOverrides(tenant, overrides);
  return tenant;
}

/** The tenant's limits in force, in the form the TenantLimiter takes them. */
export async function limitsOf(tenant: TestTenant) {
  const res = await adminFetch(`/admin/tenants/${tenant.id}`);
  expect(res.status).toBe(200);
  const { limits } = (await res.json()) as {
    limits: {
      rpm: number;
      tpm: number;
      max_concurrent: number;
      max_active_programs: number;
      monthly_token_budget: number | null;
      default_max_tokens: number;
      max_output_tokens: number | null;
      tool_events_per_minute: number;
      limiter_shards: number;
    };
  };
  return {
    rpm: limits.rpm,
    tpm: limits.tpm,
    maxConcurrent: limits.max_concurrent,
    maxActivePrograms: limits.max_active_programs,
    monthlyTokenBudget: limits.monthly_token_budget,
    defaultMaxTokens: limits.default_max_tokens,
    maxOutputTokens: limits.max_output_tokens,
    toolEventsPerMinute: limits.tool_events_per_minute,
    limiterShards: limits.limiter_shards,
  };
}

/**
 * Freezes Date.now for the whole isolate (the Worker and its Durable Objects),
 * so rate windows neither refill nor drift between calls; `advance` moves it.
 */
export function frozenClock(start = Date.now()) {
  let now = start;
  vi.spyOn(Date, "now").mockImplementation(() => now);
  return {
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    set(ms: number) {
      now = ms;
    },
  };
}

/** The x-ratelimit-* headers of a response, as numbers where they are numbers. */
export function rateLimitOf(res: Response) {
  const h = res.headers;
  return {
    limitRequests: h.get(RateLimitHeader.limitRequests),
    remainingRequests: h.get(RateLimitHeader.remainingRequests),
    resetRequests: h.get(RateLimitHeader.resetRequests),
    limitTokens: h.get(RateLimitHeader.limitTokens),
    remainingTokens: h.get(RateLimitHeader.remainingTokens),
    resetTokens: h.get(RateLimitHeader.resetTokens),
    retryAfter: h.get(RateLimitHeader.retryAfter),
  };
}

export async function tenantUsageRows(tenantId: string) {
  const { results } = await env.DB.prepare("SELECT * FROM usage WHERE tenant_id = ? ORDER BY finished_at, call_id")
    .bind(tenantId)
    .all<Record<string, unknown>>();
  return results;
}

// ---------------------------------------------------------------- pool directory

export interface TestPool {
  id: string;
  region: string;
  url: string;
  models: string[];
  weight?: number;
  status?: "active" | "draining" | "disabled";
  signing_key_id: string;
}

/** A pool directory entry: `us-east` at http://pool.test serving test-model, under the default key, unless overridden. */
export function testPool(overrides: Partial<TestPool> & { id: string }): TestPool {
  return { region: "us-east", url: "http://pool.test", models: ["test-model"], signing_key_id: "default", ...overrides };
}

/** Adds pools to the directory through the admin API. */
export async function addPools(...pools: TestPool[]): Promise<void> {
  for (const pool of pools) {
    const res = await adminFetch("/admin/pools", { method: "POST", body: JSON.stringify(pool) });
    expect(res.status).toBe(201);
  }
}

/** Creates a plan (free's limits) with these fields, e.g. allowed_models / allowed_regions. */
export async function newPlan(id: string, fields: Record<string, unknown> = {}): Promise<void> {
  const res = await adminFetch("/admin/plans", {
    method: "POST",
    body: JSON.stringify({
      id,
      name: id,
      rpm: 60,
      tpm: 60_000,
      max_concurrent: 4,
      max_active_programs: 100,
      monthly_token_budget: null,
      default_max_tokens: 256,
      ...fields,
    }),
  });
  expect(res.status).toBe(201);
}

/** Moves a tenant to a plan through the admin API. */
export async function setPlan(tenant: TestTenant, planId: string): Promise<void> {
  const res = await adminFetch(`/admin/tenants/${tenant.id}`, { method: "PATCH", body: JSON.stringify({ plan: planId }) });
  expect(res.status).toBe(200);
}

/** A settled ok call of 10 prompt tokens (2 cached) and 5 completion tokens, as an engine reported it. */
export function settlement(callId: string, finishedAt: number, over: Partial<SettleCallInput> = {}): SettleCallInput {
  return {
    callId,
    status: "ok",
    promptTokens: 10,
    cachedTokens: 2,
    completionTokens: 5,
    usageSource: "engine",
    serviceMs: 100,
    queueMs: 3,
    engine: "e1",
    finishedAt,
    ...over,
  };
}

/**
 * A new program of `tenantId` with `calls` calls begun and settled on thread main, its
 * object set up by `prepare` first (e.g. batching turned on); `options` name the program
 * and the tenant's ledger shards its begins carry.
 */
export async function programWithSettledCalls(
  tenantId: string,
  calls: number,
  prepare: (session: ReturnType<typeof programSession>) => Promise<void>,
  options: { programId?: string; ledgerShards?: number } = {},
) {
  const programId = options.programId ?? `prog_Settled${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
  const session = programSession(env, tenantId, programId);
  await prepare(session);
  const started = Date.now();
  const callIds: string[] = [];
  for (let i = 0; i < calls; i++) {
    const callId = `call_settled_${i}_${programId.slice(-8)}`;
    callIds.push(callId);
    const begun = await session.beginCall({
      ...(i === 0 ? { newProgram: { tenantId, programId } } : {}),
      callId,
      thread: "main",
      model: "m",
      ...(options.ledgerShards !== undefined ? { ledgerShards: options.ledgerShards } : {}),
      now: started,
    });
    expect(begun.ok).toBe(true);
    expect(await session.settleCall(settlement(callId, started + i))).toEqual({ settled: true });
  }
  return { programId, session, started, callIds };
}

/**
 * A D1 binding that answers nothing, as in an outage: every statement, batch and exec
 * rejects with the binding's error for a lost connection (a probe such as SELECT 1 too).
 */
export function unreachableD1(): D1Database {
  const fail = () => Promise.reject(new Error("D1_ERROR: Network connection lost."));
  const statement = { bind: () => statement, first: fail, run: fail, all: fail, raw: fail };
  return { prepare: () => statement, batch: fail, exec: fail, dump: fail } as unknown as D1Database;
}
