import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { LEASE_MS, PROGRAM_GRACE_MS } from "../../src/edge/limiter/tenant-limiter";
import { periodOf } from "../../src/edge/limits/period";
import { Header } from "../../src/protocol/headers";
import { estimatePromptTokens } from "../../src/protocol/tokens";
import {
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  frozenClock,
  gate,
  limitsOf,
  mockPool,
  newLimitedTenant,
  poolJson,
  programHeader,
  rateLimitOf,
  type TestTenant,
  tenantFetch,
  tenantUsageRows,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

const PROMPT = [{ role: "user", content: "Say hello." }];
const PROMPT_ESTIMATE = estimatePromptTokens({ messages: [{ role: "user", content: "Say hello." }] });

async function newProgram(tenant: TestTenant): Promise<string> {
  const res = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
  expect(res.status).toBe(201);
  return programHeader(res)!;
}

describe("rate-limit headers", () => {
  it("are on success responses, streaming or not, and on errors before and after admission", async () => {
    const clock = frozenClock();
    mockPool(() => poolJson({ usage: { prompt: PROMPT_ESTIMATE, completion: 3 } }));
    const tenant = await newLimitedTenant({ rpm: 10, tpm: 10_000, default_max_tokens: 100 });

    const first = await chat(tenant);
    expect(first.status).toBe(200);
    // One request taken (refills 10/min: one every 6 s); the reservation (prompt estimate + 100) held.
    expect(rateLimitOf(first)).toMatchObject({
      limitRequests: "10",
      remainingRequests: "9",
      resetRequests: "6s",
      limitTokens: "10000",
      remainingTokens: String(10_000 - (PROMPT_ESTIMATE + 100)),
      retryAfter: null,
    });
    await drain();

    // Settled: only what the engine reported stays taken; the rest of the reservation came back.
    const stream = await chat(tenant, chatBody({ stream: true, max_tokens: 50 }));
    expect(stream.status).toBe(200);
    expect(rateLimitOf(stream)).toMatchObject({
      remainingRequests: "8",
      resetRequests: "12s",
      remainingTokens: String(10_000 - (PROMPT_ESTIMATE + 3) - (PROMPT_ESTIMATE + 50)),
    });
    await stream.text();
    await drain();

    // Refused before admission (bad body): headers still there, nothing taken.
    const bad = await chat(tenant, chatBody({ temperature: "hot" }));
    await expectOpenAIError(bad, 400);
    expect(rateLimitOf(bad).remainingRequests).toBe("8");

    // Refused after admission (unknown program): the request is given back.
    const unknown = await chat(tenant, chatBody(), { [Header.program]: "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ" });
    await expectOpenAIError(unknown, 404);
    expect(rateLimitOf(unknown).remainingRequests).toBe("8");

    clock.advance(12_000);
    const later = await chat(tenant);
    expect(rateLimitOf(later)).toMatchObject({ remainingRequests: "9" });
    await drain();
  });
});

describe("requests and tokens per minute", () => {
  it("refuses the request over rpm with 429, Retry-After and headers, then admits it once the window refills", async () => {
    const clock = frozenClock();
    const pool = mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ rpm: 3 });
    for (let i = 0; i < 3; i++) expect((await chat(tenant)).status).toBe(200);
    await drain();

    const refused = await chat(tenant);
    const body = await expectOpenAIError(refused, 429, "rate_limit_error");
    expect(body.error.code).toBe("rate_limit_exceeded");
    expect(body.error.message).toMatch(/requests per minute/);
    // 3 a minute: one request comes back every 20 s.
    expect(rateLimitOf(refused)).toMatchObject({
      limitRequests: "3",
      remainingRequests: "0",
      resetRequests: "1m0s",
      retryAfter: "20",
    });
    expect(refused.headers.get(Header.program)).toBeNull();
    expect(pool).toHaveLength(3);

    clock.advance(19_000);
    await expectOpenAIError(await chat(tenant), 429);
    clock.advance(1_000);
    expect((await chat(tenant)).status).toBe(200);
    expect(pool).toHaveLength(4);
    await drain();
  });

  it("reserves prompt estimate + max_tokens against tpm and gives back what the call did not use", async () => {
    const clock = frozenClock();
    const reserve = PROMPT_ESTIMATE + 400;
    let completion = 400;
    mockPool(() => poolJson({ usage: { prompt: PROMPT_ESTIMATE, completion } }));
    const tenant = await newLimitedTenant({ tpm: 1_000 });
    const body = chatBody({ max_tokens: 400 });

    // Two calls that use all they reserved leave less than a reservation.
    expect((await chat(tenant, body)).status).toBe(200);
    expect((await chat(tenant, body)).status).toBe(200);
    await drain();
    const refused = await chat(tenant, body);
    const error = await expectOpenAIError(refused, 429, "rate_limit_error");
    expect(error.error.message).toMatch(/tokens per minute/);
    const left = 1_000 - 2 * reserve;
    expect(rateLimitOf(refused)).toMatchObject({
      limitTokens: "1000",
      remainingTokens: String(left),
      retryAfter: String(Math.ceil(((reserve - left) * 60_000) / 1_000 / 1_000)),
    });

    // Refilled: calls that use little give the rest of their reservation back at settle.
    clock.advance(60_000);
    completion = 10;
    for (let i = 0; i < 4; i++) {
      expect((await chat(tenant, body)).status).toBe(200);
      await drain();
    }
    // A reservation larger than the whole per-minute limit can never fit.
    const tooLarge = await chat(tenant, chatBody({ max_tokens: 5_000 }));
    expect((await expectOpenAIError(tooLarge, 429)).error.code).toBe("request_exceeds_tokens_per_minute");
  });
});

describe("concurrency", () => {
  it("lets at most 5 of 50 parallel calls reach the pool; the other 45 get 429 with headers; slots come back", async () => {
    const release = gate();
    let inFlight = 0;
    let maxInFlight = 0;
    let arrived = 0;
    mockPool(async () => {
      inFlight += 1;
      arrived += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await release.promise;
      inFlight -= 1;
      return poolJson();
    });
    const tenant = await newLimitedTenant({ max_concurrent: 5, rpm: 1_000, tpm: 1_000_000 });
    const programId = await newProgram(tenant);

    const ok: Response[] = [];
    const refused: Response[] = [];
    const calls = Array.from({ length: 50 }, (_, i) =>
      chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: `t${i}` }).then((res) => {
        (res.status === 200 ? ok : refused).push(res);
        return res;
      }),
    );
    // The 45 refusals can come back before the 5 admitted calls have reached the pool.
    await vi.waitFor(() => expect([refused.length, arrived]).toEqual([45, 5]), { timeout: 15_000, interval: 20 });
    expect(ok).toHaveLength(0);
    for (const res of refused) {
      const body = await expectOpenAIError(res, 429, "rate_limit_error");
      expect(body.error.code).toBe("concurrency_limit_exceeded");
      expect(rateLimitOf(res)).toMatchObject({ retryAfter: "1", limitRequests: "1000", limitTokens: "1000000" });
      expect(rateLimitOf(res).remainingRequests).toEqual(expect.stringMatching(/^\d+$/));
    }

    release.open();
    await Promise.all(calls);
    await drain();
    expect(ok).toHaveLength(5);
    expect(maxInFlight).toBe(5);
    expect(arrived).toBe(5);

    // Every slot is free again once the calls settled.
    const again = await Promise.all(
      Array.from({ length: 5 }, (_, i) => chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: `u${i}` })),
    );
    expect(again.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    await drain();
    expect(maxInFlight).toBe(5);
  });

  it("expires the lease of a call whose edge died, freeing its slot (alarm); a renewed lease survives", async () => {
    const clock = frozenClock();
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ max_concurrent: 1 });
    const limits = await limitsOf(tenant);
    const limiter = tenantLimiter(env, tenant.id);

    // An edge admits a call and dies before settling it.
    const dead = await limiter.admitCall({ callId: "call_dead", now: clock.now(), limits, promptTokens: 0, maxTokens: 100 });
    expect(dead).toMatchObject({ ok: true, leaseExpiresAt: clock.now() + LEASE_MS });
    const blocked = await chat(tenant);
    expect((await expectOpenAIError(blocked, 429)).error.code).toBe("concurrency_limit_exceeded");

    // Renewed before it ran out: still held after the original expiry.
    clock.advance(LEASE_MS - 1_000);
    expect(await limiter.renewLease({ callId: "call_dead", now: clock.now() })).toBe(true);
    clock.advance(2_000);
    expect(await runDurableObjectAlarm(limiter)).toBe(true);
    expect((await limiter.peek({ now: clock.now(), limits })).inFlight).toBe(1);

    // No more renewals: the alarm frees the slot.
    clock.advance(LEASE_MS);
    expect(await runDurableObjectAlarm(limiter)).toBe(true);
    expect((await limiter.peek({ now: clock.now(), limits })).inFlight).toBe(0);
    expect((await chat(tenant)).status).toBe(200);
    await drain();

    // The dead call's settle arriving late still charges what it used, once.
    const before = (await limiter.peek({ now: clock.now(), limits })).budget.committed;
    expect(await limiter.settleLease({ callId: "call_dead", tokens: 40, finishedAt: clock.now() })).toEqual({
      settled: true,
      expired: true,
    });
    expect(await limiter.settleLease({ callId: "call_dead", tokens: 40, finishedAt: clock.now() })).toEqual({
      settled: false,
      reason: "already_settled",
    });
    expect((await limiter.peek({ now: clock.now(), limits })).budget.committed).toBe(before + 40);
  });

  it("gives back the slot of a call its program refused", async () => {
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ max_concurrent: 1 });
    for (let i = 0; i < 3; i++) {
      const res = await chat(tenant, chatBody(), { [Header.program]: "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ" });
      await expectOpenAIError(res, 404);
    }
    expect((await chat(tenant)).status).toBe(200);
    await drain();
  });
});

describe("settling", () => {
  it("is idempotent on the call ID: a repeated settle never charges or releases twice", async () => {
    const clock = frozenClock();
    const tenant = await newLimitedTenant({ tpm: 10_000, max_concurrent: 2 });
    const limits = await limitsOf(tenant);
    const limiter = tenantLimiter(env, tenant.id);
    await limiter.admitCall({ callId: "call_a", now: clock.now(), limits, promptTokens: 0, maxTokens: 1_000 });
    await limiter.admitCall({ callId: "call_b", now: clock.now(), limits, promptTokens: 0, maxTokens: 1_000 });
    expect(await limiter.settleLease({ callId: "call_a", tokens: 300, finishedAt: clock.now() })).toEqual({
      settled: true,
      expired: false,
    });
    const once = await limiter.peek({ now: clock.now(), limits });
    expect(once).toMatchObject({ inFlight: 1, tokens: { remaining: 10_000 - 300 - 1_000 } });
    expect(once.budget.committed).toBe(300 + 1_000);
    for (let i = 0; i < 3; i++) {
      expect(await limiter.settleLease({ callId: "call_a", tokens: 300, finishedAt: clock.now() })).toEqual({
        settled: false,
        reason: "already_settled",
      });
      expect(await limiter.cancelLease({ callId: "call_a", now: clock.now() })).toMatchObject({ cancelled: false });
    }
    expect(await limiter.peek({ now: clock.now(), limits })).toEqual(once);
    expect(await limiter.settleLease({ callId: "call_never", tokens: 1, finishedAt: clock.now() })).toEqual({
      settled: false,
      reason: "unknown_call",
    });
    expect(await limiter.settleLease({ callId: "call_b", tokens: -1, finishedAt: clock.now() })).toMatchObject({
      settled: false,
      reason: "invalid_input",
    });
    expect(await limiter.peek({ now: clock.now(), limits })).toEqual(once);
  });
});

describe("token budget", () => {
  it("never lets a burst of parallel calls overspend, with an engine that runs to any limit it is not given", async () => {
    const clock = frozenClock();
    const defaultMaxTokens = 100;
    const budget = 2_000;
    // Like a real engine: it generates up to the max_tokens (or max_completion_tokens) it is
    // sent, and without one runs on to its context length. Only the limit the edge sends
    // bounds it, so an edge that reserves a limit but does not send it overspends here.
    const CONTEXT_LENGTH = 8_192;
    const sentLimits: (number | undefined)[] = [];
    mockPool(async ({ body }) => {
      const sent = JSON.parse(new TextDecoder().decode(body)) as { max_tokens?: number; max_completion_tokens?: number };
      const limit = sent.max_completion_tokens ?? sent.max_tokens;
      sentLimits.push(limit);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return poolJson({ usage: { prompt: PROMPT_ESTIMATE, completion: limit ?? CONTEXT_LENGTH - PROMPT_ESTIMATE } });
    });
    const tenant = await newLimitedTenant({
      monthly_token_budget: budget,
      default_max_tokens: defaultMaxTokens,
      max_concurrent: 100,
      rpm: 1_000,
      tpm: 1_000_000,
    });
    const programId = await newProgram(tenant);
    // No max_tokens: the plan default bounds each call, and the last one is clamped to what the budget still holds.
    const body = chatBody({ messages: PROMPT });

    const burst = await Promise.all(
      Array.from({ length: 40 }, (_, i) => chat(tenant, body, { [Header.program]: programId, [Header.thread]: `b${i}` })),
    );
    await drain();
    const statuses = burst.map((r) => r.status);
    const reserve = PROMPT_ESTIMATE + defaultMaxTokens;
    const full = Math.floor(budget / reserve);
    const clampedLimit = budget - full * reserve - PROMPT_ESTIMATE;
    const admitted = full + (clampedLimit >= 1 ? 1 : 0);
    expect(statuses.filter((s) => s === 200)).toHaveLength(admitted);
    expect(statuses.filter((s) => s === 429)).toHaveLength(40 - admitted);
    expect(sentLimits).toHaveLength(admitted);
    expect([...sentLimits].sort((a, b) => (b ?? 0) - (a ?? 0))).toEqual([
      ...Array.from({ length: full }, () => defaultMaxTokens),
      ...(clampedLimit >= 1 ? [clampedLimit] : []),
    ]);

    const rows = await tenantUsageRows(tenant.id);
    const spent = rows.reduce((sum, r) => sum + Number(r.prompt_tokens) + Number(r.completion_tokens), 0);
    expect(rows).toHaveLength(admitted);
    // The engine produced exactly what it was allowed, and that was what admission reserved: no overspend at all.
    expect(spent).toBeLessThanOrEqual(budget);
    expect(budget - spent).toBeLessThan(PROMPT_ESTIMATE + 1);

    const after = await chat(tenant, body, { [Header.program]: programId });
    const error = await expectOpenAIError(after, 429, "insufficient_quota");
    expect(error.error.code).toBe("budget_exhausted");
    const periodEnd = periodOf(clock.now()).endMs;
    expect(Number(after.headers.get("retry-after"))).toBe(Math.ceil((periodEnd - clock.now()) / 1_000));
    expect(rateLimitOf(after).limitRequests).toBe("1000");

    // A new month: the budget is back. (A new program: a month later the burst's program has gone
    // idle, and whether its idle alarm has fired by now depends on this machine's speed: 409 then.)
    clock.set(periodEnd + 1_000);
    expect((await chat(tenant, body)).status).toBe(200);
    await drain();
  });
});

describe("active programs", () => {
  it("applies when a program is created (POST or a call without the header), not to calls of existing ones", async () => {
    const clock = frozenClock();
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ max_active_programs: 2 });
    const first = await newProgram(tenant);
    const viaChat = await chat(tenant);
    expect(viaChat.status).toBe(200);
    await drain();

    const refusedPost = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    const postError = await expectOpenAIError(refusedPost, 429, "rate_limit_error");
    expect(postError.error.code).toBe("active_programs_limit_exceeded");
    expect(refusedPost.headers.get("retry-after")).toEqual(expect.stringMatching(/^\d+$/));
    const refusedChat = await chat(tenant);
    expect((await expectOpenAIError(refusedChat, 429)).error.code).toBe("active_programs_limit_exceeded");
    expect((await chat(tenant, chatBody(), { [Header.program]: first })).status).toBe(200);
    await drain();

    // Ending one frees its slot.
    expect((await tenantFetch(tenant, `/v1/programs/${first}`, { method: "DELETE" })).status).toBe(200);
    const third = await newProgram(tenant);

    // A release that got lost is found in D1 once the tenant hits the limit.
    expect((await tenantFetch(tenant, `/v1/programs/${third}`, { method: "DELETE" })).status).toBe(200);
    const limiter = tenantLimiter(env, tenant.id);
    await runInDurableObject(limiter, (_instance, state) => {
      state.storage.sql.exec("INSERT INTO programs (program_id, admitted_at) VALUES (?, ?)", third, clock.now());
    });
    await expectOpenAIError(await tenantFetch(tenant, "/v1/programs", { method: "POST" }), 429);
    clock.advance(PROGRAM_GRACE_MS);
    expect((await tenantFetch(tenant, "/v1/programs", { method: "POST" })).status).toBe(201);
  });
});
