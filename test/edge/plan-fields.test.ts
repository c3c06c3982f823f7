import { describe, expect, it } from "vitest";
import { adminFetch, expectOpenAIError, newTenant, setOverrides } from "./support";

/* Issue 9: the plan fields added by migration 0003, through the admin API. */

const json = (body: unknown) => ({ body: JSON.stringify(body) });

describe("plan fields max_output_tokens, allowed_extensions, tool_events_per_minute", () => {
  it("are seeded (free 8,192 / pro 32,768 output tokens) and default when a plan is created without them", async () => {
    const list = (await (await adminFetch("/admin/plans")).json()) as { data: Record<string, unknown>[] };
    expect(list.data.find((p) => p.id === "free")).toMatchObject({ max_output_tokens: 8_192, allowed_extensions: [], tool_events_per_minute: 6_000 });
    expect(list.data.find((p) => p.id === "pro")).toMatchObject({ max_output_tokens: 32_768, allowed_extensions: [], tool_events_per_minute: 60_000 });

    const base = { id: "lab", name: "Lab", rpm: 10, tpm: 10_000, max_concurrent: 2, max_active_programs: 10, monthly_token_budget: null, default_max_tokens: 256 };
    const created = await adminFetch("/admin/plans", { method: "POST", ...json(base) });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ max_output_tokens: null, allowed_extensions: [], tool_events_per_minute: 6_000 });

    const patched = await adminFetch("/admin/plans/lab", {
      method: "PATCH",
      ...json({ max_output_tokens: 2_048, allowed_extensions: ["ignore_eos"], tool_events_per_minute: 600 }),
    });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({ max_output_tokens: 2_048, allowed_extensions: ["ignore_eos"], tool_events_per_minute: 600 });
    const uncapped = await adminFetch("/admin/plans/lab", { method: "PATCH", ...json({ max_output_tokens: null }) });
    expect(await uncapped.json()).toMatchObject({ max_output_tokens: null });
    const bad = await adminFetch("/admin/plans/lab", { method: "PATCH", ...json({ max_output_tokens: 0 }) });
    expect((await expectOpenAIError(bad, 400)).error.param).toBe("max_output_tokens");
  });

  it("show in a tenant's overrides and limits in force", async () => {
    const tenant = await newTenant();
    await setOverrides(tenant, { max_output_tokens: 100, allowed_extensions: ["min_tokens"], tool_events_per_minute: 64 });
    const view = (await (await adminFetch(`/admin/tenants/${tenant.id}`)).json()) as Record<string, unknown>;
    expect(view).toMatchObject({
      overrides: { max_output_tokens: 100, allowed_extensions: ["min_tokens"], tool_events_per_minute: 64 },
      limits: { max_output_tokens: 100, allowed_extensions: ["min_tokens"], tool_events_per_minute: 64, default_max_tokens: 1_024 },
    });
    await setOverrides(tenant, { max_output_tokens: null, allowed_extensions: null, tool_events_per_minute: null });
    const back = (await (await adminFetch(`/admin/tenants/${tenant.id}`)).json()) as Record<string, unknown>;
    expect(back).toMatchObject({
      overrides: { max_output_tokens: null, allowed_extensions: null, tool_events_per_minute: null },
      limits: { max_output_tokens: 8_192, allowed_extensions: [], tool_events_per_minute: 6_000 },
    });
  });
});
