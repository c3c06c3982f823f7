import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { periodOf } from "../../src/edge/limits/period";
import { programSession } from "../../src/edge/program/access";
import { Header } from "../../src/protocol/headers";
import {
  adminFetch,
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  frozenClock,
  limitsOf,
  mockPool,
  newLimitedTenant,
  poolJson,
  poolSseEvents,
  programHeader,
  sseResponse,
  type TestTenant,
  tenantFetch,
  tenantUsageRows,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

const GENEROUS = { rpm: 10_000, tpm: 10_000_000, max_concurrent: 100, max_active_programs: 100, monthly_token_budget: null };

interface Reported {
  prompt: number;
  cached: number;
  completion: number;
  serviceMs: number;
}

const sum = (rows: Record<string, unknown>[], column: string) => rows.reduce((s, r) => s + Number(r[column]), 0);

describe("usage ledger", () => {
  it("has one row per call with the engine's figures, and repeated settles change nothing", async () => {
    const reported = new Map<string, Reported>();
    let n = 0;
    mockPool(({ request, body }) => {
      n += 1;
      const usage = { prompt: 10 + n, cached: n % 3, completion: 2 * n };
      const stats = { engine: `engine-${n % 2}`, queueMs: n, serviceMs: 100 + n };
      reported.set(request.headers.get(Header.call)!, { ...usage, serviceMs: stats.serviceMs });
      const streaming = (JSON.parse(new TextDecoder().decode(body)) as { stream?: boolean }).stream === true;
      return streaming ? sseResponse(poolSseEvents(["a", "b"], { usage, stats })) : poolJson({ usage, stats });
    });
    const tenant = await newLimitedTenant(GENEROUS);
    const programs: string[] = [];
    for (let i = 0; i < 12; i++) {
      const headers: Record<string, string> = programs.length > 0 && i % 3 !== 0 ? { [Header.program]: programs.at(-1)! } : {};
      const res = await chat(tenant, chatBody({ stream: i % 2 === 0 }), headers);
      expect(res.status).toBe(200);
      await res.text();
      if (!headers[Header.program]) programs.push(programHeader(res)!);
    }
    await drain();

    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(12);
    expect(new Set(rows.map((r) => r.call_id))).toEqual(new Set(reported.keys()));
    const engine = [...reported.values()];
    expect(sum(rows, "prompt_tokens")).toBe(engine.reduce((s, u) => s + u.prompt, 0));
    expect(sum(rows, "cached_tokens")).toBe(engine.reduce((s, u) => s + u.cached, 0));
    expect(sum(rows, "completion_tokens")).toBe(engine.reduce((s, u) => s + u.completion, 0));
    expect(sum(rows, "service_ms")).toBe(engine.reduce((s, u) => s + u.serviceMs, 0));
    for (const row of rows) {
      expect(row).toMatchObject({ tenant_id: tenant.id, thread: "main", model: "test-model", pool: "pool-test", status: "ok" });
      expect(programs).toContain(row.program_id);
      expect(row.engine).toMatch(/^engine-[01]$/);
      expect(Number(row.finished_at)).toBeGreaterThanOrEqual(Number(row.started_at));
    }

    // Every call settled again, in its program and at the limiter: nothing moves.
    const limits = await limitsOf(tenant);
    const limiter = tenantLimiter(env, tenant.id);
    const committed = (await limiter.peek({ now: Date.now(), limits })).budget.committed;
    expect(committed).toBe(sum(rows, "prompt_tokens") + sum(rows, "completion_tokens"));
    for (const row of rows) {
      const callId = String(row.call_id);
      const again = await programSession(env, tenant.id, String(row.program_id)).settleCall({
        callId,
        status: "ok",
        promptTokens: 999,
        cachedTokens: 0,
        usageSource: "engine",
        completionTokens: 999,
        serviceMs: 999,
        queueMs: 0,
        engine: "other",
        finishedAt: Date.now(),
      });
      expect(again).toEqual({ settled: false, reason: "already_settled" });
      expect(await limiter.settleLease({ callId, tokens: 999, finishedAt: Date.now() })).toEqual({
        settled: false,
        reason: "already_settled",
      });
    }
    expect(await tenantUsageRows(tenant.id)).toEqual(rows);
    expect((await limiter.peek({ now: Date.now(), limits })).budget.committed).toBe(committed);

    // Program summaries, written when a program ends, agree with the ledger.
    for (const programId of programs) {
      expect((await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" })).status).toBe(200);
      const summary = await env.DB.prepare("SELECT calls, prompt_tokens, completion_tokens FROM programs WHERE id = ?")
        .bind(programId)
        .first<{ calls: number; prompt_tokens: number; completion_tokens: number }>();
      const own = rows.filter((r) => r.program_id === programId);
      expect(summary).toEqual({
        calls: own.length,
        prompt_tokens: sum(own, "prompt_tokens"),
        completion_tokens: sum(own, "completion_tokens"),
      });
    }
  });

  it("records the engine's work for a call whose answer broke off after the pool answered", async () => {
    mockPool(() => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new TextEncoder().encode('{"id":"chatcmpl-x","obj'));
          controller.error(new Error("connection reset"));
        },
      });
      return new Response(body, {
        status: 200,
        headers: { "content-type": "application/json", [Header.engine]: "engine-z", [Header.queueMs]: "4", [Header.serviceMs]: "250" },
      });
    });
    const tenant = await newLimitedTenant(GENEROUS);
    const messages = [{ role: "user", content: "y".repeat(400) }];
    const res = await chat(tenant, chatBody({ messages }));
    expect((await expectOpenAIError(res, 502)).error.code).toBe("pool_response_broken");
    await drain();
    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "error", engine: "engine-z", service_ms: 250, queue_ms: 4, completion_tokens: 0 });
    expect(Number(rows[0]!.prompt_tokens)).toBeGreaterThanOrEqual(100);
  });
});

async function usageOf(tenant: TestTenant, query: string) {
  const res = await tenantFetch(tenant, `/v1/usage${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    object: string;
    group_by: string;
    from: string;
    to: string;
    data: Record<string, number | string>[];
    totals: Record<string, number>;
  };
}

describe("GET /v1/usage", () => {
  it("groups the tenant's own usage by day or by program, within from..to, with totals", async () => {
    const clock = frozenClock(Date.UTC(2031, 4, 30, 23, 0));
    mockPool(() => poolJson({ usage: { prompt: 10, completion: 5, cached: 2 }, stats: { engine: "e", queueMs: 1, serviceMs: 40 } }));
    const tenant = await newLimitedTenant(GENEROUS);
    const stranger = await newLimitedTenant(GENEROUS);

    const first = await chat(tenant);
    const programA = programHeader(first)!;
    await chat(tenant, chatBody(), { [Header.program]: programA });
    await drain();
    clock.advance(2 * 3_600_000); // 2031-05-31 01:00
    await chat(tenant, chatBody(), { [Header.program]: programA });
    clock.advance(60_000);
    const programB = programHeader(await chat(tenant))!;
    await chat(stranger);
    await drain();
    clock.advance(24 * 3_600_000); // 2031-06-01 01:00
    await chat(tenant, chatBody(), { [Header.program]: programB });
    await drain();

    const byDay = await usageOf(tenant, "?group_by=day&from=2031-05-01&to=2031-06-30");
    expect(byDay).toMatchObject({ object: "list", group_by: "day", from: "2031-05-01", to: "2031-06-30" });
    const figures = (calls: number) => ({
      calls,
      prompt_tokens: 10 * calls,
      cached_tokens: 2 * calls,
      completion_tokens: 5 * calls,
      total_tokens: 15 * calls,
      service_ms: 40 * calls,
    });
    expect(byDay.data).toEqual([
      { day: "2031-05-30", ...figures(2) },
      { day: "2031-05-31", ...figures(2) },
      { day: "2031-06-01", ...figures(1) },
    ]);
    expect(byDay.totals).toEqual(figures(5));

    const byProgram = await usageOf(tenant, "?group_by=program&from=2031-05-31&to=2031-05-31");
    expect(byProgram.data).toEqual([
      { program_id: programA, ...figures(1) },
      { program_id: programB, ...figures(1) },
    ]);
    expect(byProgram.totals).toEqual(figures(2));

    // Defaults: day grouping, this month so far (June: one call).
    const defaults = await usageOf(tenant, "");
    expect(defaults).toMatchObject({ group_by: "day", from: "2031-06-01", to: "2031-06-01", totals: figures(1) });

    // The stranger sees its own call only, and nothing of the tenant's programs.
    const theirs = await usageOf(stranger, "?group_by=program&from=2031-05-01&to=2031-06-30");
    expect(theirs.totals).toEqual(figures(1));
    expect(theirs.data.map((d) => d.program_id)).not.toContain(programA);
    expect((await tenantFetch(stranger, `/v1/programs/${programA}`)).status).toBe(404);
    expect((await tenantFetch(stranger, `/v1/programs/${programA}`, { method: "DELETE" })).status).toBe(404);
    expect((await chat(stranger, chatBody(), { [Header.program]: programA })).status).toBe(404);
    await drain();
    expect((await usageOf(tenant, "?from=2031-05-01&to=2031-06-30")).totals).toEqual(figures(5));
  });

  const bad: [string, string][] = [
    ["?group_by=week", "group_by"],
    ["?from=2031-02-30", "from"],
    ["?from=31-01-01", "from"],
    ["?from=2031-03-02&to=2031-03-01", "to"],
    ["?from=2029-01-01&to=2031-01-01", "to"],
    ["?groupby=day", ""],
  ];
  for (const [query, param] of bad) {
    it(`answers ${query} with 400 naming the parameter`, async () => {
      const tenant = await newLimitedTenant(GENEROUS);
      const error = await expectOpenAIError(await tenantFetch(tenant, `/v1/usage${query}`), 400, "invalid_request_error");
      if (param) expect(error.error.param).toBe(param);
    });
  }

  it("requires a tenant key", async () => {
    await expectOpenAIError(await adminFetch("/v1/usage"), 401);
  });
});

describe("GET /admin/usage/export", () => {
  it("lists every tenant for the period, and its totals equal the ledger's, in JSON and CSV", async () => {
    const clock = frozenClock(Date.UTC(2032, 1, 10));
    let n = 0;
    mockPool(() => {
      n += 1;
      return poolJson({ usage: { prompt: 7 * n, completion: n, cached: n % 2 }, stats: { engine: "e", queueMs: 0, serviceMs: 10.25 * n } });
    });
    const acme = await newLimitedTenant(GENEROUS);
    await adminFetch(`/admin/tenants/${acme.id}`, { method: "PATCH", body: JSON.stringify({ name: '=Acme, "Inc"' }) });
    const globex = await newLimitedTenant(GENEROUS);
    const idle = await newLimitedTenant(GENEROUS);
    for (let i = 0; i < 3; i++) await chat(acme);
    for (let i = 0; i < 2; i++) await chat(globex);
    await drain();
    clock.set(Date.UTC(2032, 2, 1, 0, 0, 1)); // March: not in February's export
    await chat(acme);
    await drain();

    const period = periodOf(Date.UTC(2032, 1, 10));
    const ledger = await env.DB.prepare(
      `SELECT tenant_id, COUNT(*) AS calls, SUM(prompt_tokens) AS prompt_tokens, SUM(cached_tokens) AS cached_tokens,
              SUM(completion_tokens) AS completion_tokens, SUM(service_ms) AS service_ms
       FROM usage WHERE finished_at >= ? AND finished_at < ? GROUP BY tenant_id`,
    )
      .bind(period.startMs, period.endMs)
      .all<{ tenant_id: string; calls: number; prompt_tokens: number; cached_tokens: number; completion_tokens: number; service_ms: number }>();
    const ledgerTotals = ledger.results.reduce(
      (t, r) => ({
        calls: t.calls + r.calls,
        prompt_tokens: t.prompt_tokens + r.prompt_tokens,
        cached_tokens: t.cached_tokens + r.cached_tokens,
        completion_tokens: t.completion_tokens + r.completion_tokens,
        service_ms: t.service_ms + r.service_ms,
      }),
      { calls: 0, prompt_tokens: 0, cached_tokens: 0, completion_tokens: 0, service_ms: 0 },
    );
    expect(ledgerTotals.calls).toBe(5);

    const json = (await (await adminFetch("/admin/usage/export?period=2032-02&format=json")).json()) as {
      object: string;
      period: string;
      data: Record<string, string | number>[];
      totals: Record<string, number>;
    };
    expect(json).toMatchObject({ object: "usage_export", period: "2032-02" });
    expect(json.totals).toEqual({
      ...ledgerTotals,
      total_tokens: ledgerTotals.prompt_tokens + ledgerTotals.completion_tokens,
    });
    for (const line of json.data) {
      const own = ledger.results.find((r) => r.tenant_id === line.tenant_id);
      expect(line).toMatchObject({ calls: own?.calls ?? 0, prompt_tokens: own?.prompt_tokens ?? 0, service_ms: own?.service_ms ?? 0 });
    }
    const ids = json.data.map((d) => d.tenant_id);
    expect(ids).toEqual(expect.arrayContaining([acme.id, globex.id, idle.id]));
    expect(json.data.find((d) => d.tenant_id === idle.id)).toMatchObject({ calls: 0, total_tokens: 0 });
    for (const key of ["calls", "prompt_tokens", "cached_tokens", "completion_tokens", "total_tokens"] as const) {
      expect(json.data.reduce((s, d) => s + Number(d[key]), 0)).toBe(json.totals[key]);
    }

    const csvRes = await adminFetch("/admin/usage/export?period=2032-02&format=csv");
    expect(csvRes.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(csvRes.headers.get("content-disposition")).toContain("agentix-usage-2032-02.csv");
    const lines = (await csvRes.text()).trimEnd().split("\r\n");
    expect(lines[0]).toBe(
      "period,tenant_id,tenant_name,plan,calls,prompt_tokens,cached_tokens,completion_tokens,total_tokens,service_ms",
    );
    expect(lines).toHaveLength(1 + json.data.length + 1);
    expect(lines.find((l) => l.includes(acme.id))).toContain(`"'=Acme, ""Inc"""`);
    const t = json.totals;
    expect(lines.at(-1)).toBe(
      `2032-02,TOTAL,,,${t.calls},${t.prompt_tokens},${t.cached_tokens},${t.completion_tokens},${t.total_tokens},${t.service_ms}`,
    );
  });

  it("validates the period and format", async () => {
    for (const query of ["", "?period=2032-13", "?period=2032-2", "?period=2032-02&format=xml", "?period=2032-02&x=1"]) {
      await expectOpenAIError(await adminFetch(`/admin/usage/export${query}`), 400, "invalid_request_error");
    }
    await expectOpenAIError(await tenantFetchAsNobody("/admin/usage/export?period=2032-02"), 401);
  });
});

function tenantFetchAsNobody(path: string) {
  return tenantFetch({ id: "ten_x", key: `agx_${"C".repeat(40)}`, keyId: "key_x" }, path);
}
