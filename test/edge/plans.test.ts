import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import {
  adminFetch,
  chat,
  drain,
  expectOpenAIError,
  mockPool,
  newTenant,
  poolJson,
  rateLimitOf,
  setOverrides,
  tenantFetch,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

const json = (body: unknown) => ({ body: JSON.stringify(body) });

const TEAM_PLAN = {
  id: "team",
  name: "Team",
  rpm: 120,
  tpm: 200_000,
  max_concurrent: 8,
  max_active_programs: 20,
  monthly_token_budget: null,
  default_max_tokens: 512,
  weight: 2,
};

describe("plans", () => {
  it("are seeded by the migration: free (the default) and pro", async () => {
    const list = (await (await adminFetch("/admin/plans")).json()) as { data: Record<string, unknown>[] };
    const ids = list.data.map((p) => p.id);
    expect(ids).toEqual(expect.arrayContaining(["free", "pro"]));
    const free = list.data.find((p) => p.id === "free");
    expect(free).toMatchObject({ object: "plan", rpm: 60, tpm: 60_000, max_concurrent: 4, weight: 1 });
    const tenant = await newTenant();
    const view = (await (await adminFetch(`/admin/tenants/${tenant.id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({
      plan: "free",
      overrides: { rpm: null, tpm: null, max_concurrent: null, monthly_token_budget: null },
      limits: { rpm: 60, tpm: 60_000, max_concurrent: 4, max_active_programs: 1_000, monthly_token_budget: 1_000_000 },
    });
  });

  it("can be created, read, and updated; bad input is 400, a duplicate 409, an unknown plan 404", async () => {
    const created = await adminFetch("/admin/plans", { method: "POST", ...json(TEAM_PLAN) });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ ...TEAM_PLAN, object: "plan" });

    const duplicate = await adminFetch("/admin/plans", { method: "POST", ...json(TEAM_PLAN) });
    expect((await expectOpenAIError(duplicate, 409)).error.code).toBe("plan_exists");

    const badId = await adminFetch("/admin/plans", { method: "POST", ...json({ ...TEAM_PLAN, id: "Team Plan" }) });
    expect((await expectOpenAIError(badId, 400)).error.param).toBe("id");
    const zeroRpm = await adminFetch("/admin/plans", { method: "POST", ...json({ ...TEAM_PLAN, id: "x", rpm: 0 }) });
    expect((await expectOpenAIError(zeroRpm, 400)).error.param).toBe("rpm");
    const missing = await adminFetch("/admin/plans", { method: "POST", ...json({ id: "y", name: "Y" }) });
    await expectOpenAIError(missing, 400);

    const updated = await adminFetch("/admin/plans/team", { method: "PATCH", ...json({ rpm: 240, monthly_token_budget: 5_000 }) });
    expect(await updated.json()).toMatchObject({ id: "team", rpm: 240, tpm: 200_000, monthly_token_budget: 5_000 });
    expect(await (await adminFetch("/admin/plans/team")).json()).toMatchObject({ rpm: 240 });
    await expectOpenAIError(await adminFetch("/admin/plans/team", { method: "PATCH", ...json({}) }), 400);
    await expectOpenAIError(await adminFetch("/admin/plans/team", { method: "PATCH", ...json({ weight: 0 }) }), 400);
    await expectOpenAIError(await adminFetch("/admin/plans/nope", { method: "PATCH", ...json({ rpm: 1 }) }), 404);
    await expectOpenAIError(await adminFetch("/admin/plans/nope"), 404);
  });
});

describe("tenants on plans", () => {
  it("take limits and weight (plan weight × tenant multiplier) from their plan, from the next request on", async () => {
    const pool = mockPool(() => poolJson());
    await adminFetch("/admin/plans", { method: "POST", ...json({ ...TEAM_PLAN, id: "scale", weight: 3 }) });
    const tenant = await newTenant(1.5);

    const onFree = await chat(tenant);
    expect(rateLimitOf(onFree).limitRequests).toBe("60");
    expect(pool[0]!.request.headers.get(Header.weight)).toBe("1.5");

    const moved = await adminFetch(`/admin/tenants/${tenant.id}`, { method: "PATCH", ...json({ plan: "scale" }) });
    expect(await moved.json()).toMatchObject({ plan: "scale", weight: 1.5, limits: { rpm: 120, weight: 4.5 } });
    const onScale = await chat(tenant);
    expect(rateLimitOf(onScale)).toMatchObject({ limitRequests: "120", limitTokens: "200000" });
    expect(pool[1]!.request.headers.get(Header.weight)).toBe("4.5");

    const unknown = await adminFetch(`/admin/tenants/${tenant.id}`, { method: "PATCH", ...json({ plan: "gold" }) });
    expect((await expectOpenAIError(unknown, 400)).error.code).toBe("unknown_plan");
    await expectOpenAIError(await adminFetch("/admin/tenants/ten_nope", { method: "PATCH", ...json({ plan: "pro" }) }), 404);
    await drain();
  });

  it("can be created on a plan; an unknown plan is refused", async () => {
    const res = await adminFetch("/admin/tenants", { method: "POST", ...json({ name: "Pro Co", plan: "pro" }) });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ plan: "pro", limits: { rpm: 1_000, weight: 4 } });
    const bad = await adminFetch("/admin/tenants", { method: "POST", ...json({ name: "X", plan: "gold" }) });
    expect((await expectOpenAIError(bad, 400)).error.param).toBe("plan");
  });

  it("take per-tenant overrides over the plan; null goes back to the plan's value", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    await setOverrides(tenant, { rpm: 7, tpm: 9_000 });
    expect(rateLimitOf(await chat(tenant))).toMatchObject({ limitRequests: "7", limitTokens: "9000" });
    await setOverrides(tenant, { rpm: null });
    expect(rateLimitOf(await chat(tenant))).toMatchObject({ limitRequests: "60", limitTokens: "9000" });

    const view = (await (await adminFetch(`/admin/tenants/${tenant.id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({ overrides: { rpm: null, tpm: 9_000 }, limits: { rpm: 60, tpm: 9_000 } });
    const empty = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, { method: "PATCH", ...json({}) });
    await expectOpenAIError(empty, 400);
    const negative = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, { method: "PATCH", ...json({ tpm: -5 }) });
    expect((await expectOpenAIError(negative, 400)).error.param).toBe("tpm");
    const typo = await adminFetch(`/admin/tenants/${tenant.id}/overrides`, { method: "PATCH", ...json({ rpn: 5 }) });
    await expectOpenAIError(typo, 400);
    await drain();
  });
});

describe("API keys", () => {
  it("rotate: several keys work at once, the list shows prefixes and last use, a revoked one fails on the next request", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const second = (await (await adminFetch(`/admin/tenants/${tenant.id}/keys`, { method: "POST", ...json({ name: "new" }) })).json()) as {
      id: string;
      key: string;
    };
    const viaOld = { ...tenant };
    const viaNew = { ...tenant, key: second.key, keyId: second.id };
    expect((await chat(viaOld)).status).toBe(200);
    expect((await chat(viaNew)).status).toBe(200);
    await drain();

    const list = (await (await adminFetch(`/admin/tenants/${tenant.id}/keys`)).json()) as { data: Record<string, unknown>[] };
    expect(list.data).toHaveLength(2);
    for (const key of list.data) {
      expect(key.last_used_at).toEqual(expect.any(Number));
      expect(String(key.prefix)).toMatch(/^agx_.{8}$/);
      expect(JSON.stringify(key)).not.toContain(tenant.key);
      expect(JSON.stringify(key)).not.toContain(second.key);
    }

    expect((await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).status).toBe(200);
    await expectOpenAIError(await chat(viaOld), 401, "authentication_error");
    await expectOpenAIError(await tenantFetch(viaOld, "/v1/usage"), 401);
    expect((await chat(viaNew)).status).toBe(200);
    await drain();
    const stored = await env.DB.prepare("SELECT revoked_at FROM api_keys WHERE id = ?").bind(second.id).first();
    expect(stored).toEqual({ revoked_at: null });
  });
});
