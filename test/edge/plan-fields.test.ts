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

/* Issue 11: plans may restrict the models and regions their tenants use. */
describe("plan fields allowed_models, allowed_regions", () => {
  const base = { name: "Resident", rpm: 10, tpm: 10_000, max_concurrent: 2, max_active_programs: 10, monthly_token_budget: null, default_max_tokens: 256 };

  it("are null (no restriction) on the seeded plans and by default; set as sorted sets, cleared with null", async () => {
    const list = (await (await adminFetch("/admin/plans")).json()) as { data: Record<string, unknown>[] };
    for (const id of ["free", "pro"]) expect(list.data.find((p) => p.id === id)).toMatchObject({ allowed_models: null, allowed_regions: null });

    const open = await adminFetch("/admin/plans", { method: "POST", ...json({ ...base, id: "open" }) });
    expect(await open.json()).toMatchObject({ allowed_models: null, allowed_regions: null });

    const created = await adminFetch("/admin/plans", {
      method: "POST",
      ...json({ ...base, id: "resident", allowed_models: ["org/b-model", "a-model", "a-model"], allowed_regions: ["eu-west"] }),
    });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ allowed_models: ["a-model", "org/b-model"], allowed_regions: ["eu-west"] });

    const patched = await adminFetch("/admin/plans/resident", { method: "PATCH", ...json({ allowed_regions: ["eu-west", "eu-central"] }) });
    expect(await patched.json()).toMatchObject({ allowed_models: ["a-model", "org/b-model"], allowed_regions: ["eu-central", "eu-west"] });
    const cleared = await adminFetch("/admin/plans/resident", { method: "PATCH", ...json({ allowed_models: null }) });
    expect(await cleared.json()).toMatchObject({ allowed_models: null, allowed_regions: ["eu-central", "eu-west"] });
    expect(await (await adminFetch("/admin/plans/resident")).json()).toMatchObject({ allowed_models: null, allowed_regions: ["eu-central", "eu-west"] });
  });

  it("refuse an empty list (null means no restriction), bad names and bad regions, naming the field", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ allowed_models: [] }, "allowed_models"],
      [{ allowed_models: ["ok", "has space"] }, "allowed_models.1"],
      [{ allowed_models: "a-model" }, "allowed_models"],
      [{ allowed_regions: [] }, "allowed_regions"],
      [{ allowed_regions: ["EU West"] }, "allowed_regions.0"],
    ];
    for (const [fields, param] of cases) {
      const create = await adminFetch("/admin/plans", { method: "POST", ...json({ ...base, id: "bad-plan", ...fields }) });
      expect((await expectOpenAIError(create, 400)).error.param, JSON.stringify(fields)).toBe(param);
      const update = await adminFetch("/admin/plans/free", { method: "PATCH", ...json(fields) });
      expect((await expectOpenAIError(update, 400)).error.param, JSON.stringify(fields)).toBe(param);
    }
    expect((await adminFetch("/admin/plans/bad-plan")).status).toBe(404);
  });
});
