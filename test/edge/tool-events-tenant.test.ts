import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { DEFAULT_TOOL_EVENTS_PER_MINUTE } from "../../src/edge/limits/plan-limits";
import { TOOL_EVENTS_PER_MINUTE } from "../../src/edge/program/tool-store";
import { MAX_TOOL_EVENTS_PER_BATCH } from "../../src/protocol/tool-events";
import {
  adminFetch,
  drain,
  expectOpenAIError,
  frozenClock,
  limitsOf,
  mockPool,
  newLimitedTenant,
  newTenant,
  poolJson,
  programHeader,
  setOverrides,
  type TestTenant,
  tenantFetch,
} from "./support";

/*
 * Issue 9, item 4: tool events are capped per tenant (all programs together), not only
 * per program, by a bucket in the tenant's limiter (tool_events_per_minute).
 */

afterEach(() => {
  vi.restoreAllMocks();
});

async function newProgram(tenant: TestTenant): Promise<string> {
  const res = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
  expect(res.status).toBe(201);
  return programHeader(res)!;
}

const batch = (n: number) => ({
  events: Array.from({ length: n }, (_, i) => ({ type: "tool_started", tool: "bash", tool_call_id: `call_${i}` })),
});

function sendEvents(tenant: TestTenant, programId: string, n: number): Promise<Response> {
  return tenantFetch(tenant, `/v1/programs/${programId}/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(batch(n)),
  });
}

describe("the tenant-wide tool-event cap", () => {
  it("refuses a tenant's events across programs past its per-minute limit with 429 and Retry-After, then refills", async () => {
    const clock = frozenClock();
    mockPool(() => new Response("{}", { status: 202 }));
    const perMinute = 128;
    const tenant = await newLimitedTenant({ tool_events_per_minute: perMinute });
    // Each program is far below its own cap (TOOL_EVENTS_PER_MINUTE); only the tenant's binds.
    const programs = await Promise.all(Array.from({ length: 4 }, () => newProgram(tenant)));
    expect(perMinute).toBeLessThan(TOOL_EVENTS_PER_MINUTE);

    const sent = [await sendEvents(tenant, programs[0]!, 64), await sendEvents(tenant, programs[1]!, 60)];
    expect(sent.map((r) => r.status)).toEqual([202, 202]);
    // 4 left: a batch of 5 on a third program is refused whole; one of 4 passes.
    const refused = await sendEvents(tenant, programs[2]!, 5);
    const error = await expectOpenAIError(refused, 429, "rate_limit_error");
    expect(error.error.code).toBe("tool_events_rate_exceeded");
    expect(error.error.message).toContain(`${perMinute} a minute`);
    // One event comes back every 60 s / 128: the missing one in under a second.
    expect(refused.headers.get("retry-after")).toBe("1");
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programs[2]}`)).json()) as { tools: { events: { tool_started: number } } };
    expect(state.tools.events.tool_started).toBe(0);
    expect((await sendEvents(tenant, programs[3]!, 4)).status).toBe(202);
    expect((await expectOpenAIError(await sendEvents(tenant, programs[3]!, 1), 429)).error.code).toBe("tool_events_rate_exceeded");

    // The bucket refills over a minute.
    clock.advance(30_000);
    expect((await sendEvents(tenant, programs[2]!, 64)).status).toBe(202);
    await expectOpenAIError(await sendEvents(tenant, programs[2]!, 1), 429);
    clock.advance(60_000);
    expect((await sendEvents(tenant, programs[1]!, 64)).status).toBe(202);
    expect((await sendEvents(tenant, programs[0]!, 64)).status).toBe(202);
    await drain();
  });

  it("is per tenant: another tenant's events do not count", async () => {
    frozenClock();
    mockPool(() => new Response("{}", { status: 202 }));
    const busy = await newLimitedTenant({ tool_events_per_minute: 64 });
    const quiet = await newLimitedTenant({ tool_events_per_minute: 64 });
    expect((await sendEvents(busy, await newProgram(busy), 64)).status).toBe(202);
    await expectOpenAIError(await sendEvents(busy, await newProgram(busy), 1), 429);
    expect((await sendEvents(quiet, await newProgram(quiet), 64)).status).toBe(202);
    await drain();
  });

  it("comes from the plan (6,000 a minute unless set; pro 60,000), with a per-tenant override of at least one batch", async () => {
    const plans = (await (await adminFetch("/admin/plans")).json()) as { data: { id: string; tool_events_per_minute: number }[] };
    expect(plans.data.find((p) => p.id === "free")?.tool_events_per_minute).toBe(DEFAULT_TOOL_EVENTS_PER_MINUTE);
    expect(plans.data.find((p) => p.id === "pro")?.tool_events_per_minute).toBe(60_000);

    const tenant = await newTenant();
    expect((await limitsOf(tenant)).toolEventsPerMinute).toBe(DEFAULT_TOOL_EVENTS_PER_MINUTE);
    await setOverrides(tenant, { tool_events_per_minute: 1_000 });
    expect((await limitsOf(tenant)).toolEventsPerMinute).toBe(1_000);
    const tooSmall = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, {
      method: "PATCH",
      body: JSON.stringify({ tool_events_per_minute: MAX_TOOL_EVENTS_PER_BATCH - 1 }),
    });
    expect((await expectOpenAIError(tooSmall, 400)).error.param).toBe("tool_events_per_minute");
  });

  it("is taken in the tenant's limiter before the program is asked: refused batches of unknown programs count too", async () => {
    const clock = frozenClock();
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ tool_events_per_minute: 64 });
    const limits = await limitsOf(tenant);
    // An unknown program: 404, but the attempt took from the tenant's bucket.
    const unknown = await sendEvents(tenant, "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ", 60);
    await expectOpenAIError(unknown, 404);
    const limiter = tenantLimiter(env, tenant.id);
    expect(await limiter.admitToolEvents({ now: clock.now(), limits, count: 5 })).toMatchObject({ ok: false, limitPerMinute: 64 });
    expect(await limiter.admitToolEvents({ now: clock.now(), limits, count: 4 })).toEqual({ ok: true, remaining: 0 });
  });
});
