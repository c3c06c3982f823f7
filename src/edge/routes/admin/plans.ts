import { asc, eq } from "drizzle-orm";
import { Hono } from "hono";
import { openAIError } from "../../../protocol/errors.js";
import type { EdgeEnv } from "../../context.js";
import { database } from "../../db/client.js";
import { type Plan, plans } from "../../db/schema.js";
import { refreshTenantProfiles, tenantsOnPlan } from "../../auth/push.js";
import { readJsonBody } from "../../http/body.js";
import { ADMIN_BODY_BYTES, CreatePlanBody, UpdatePlanBody } from "./bodies.js";
import { planView } from "./views.js";

export const planNotFound = (id: string) =>
  openAIError(404, `Plan ${id} not found.`, { code: "plan_not_found", param: "plan_id" });

/** Plans: list, read, create, update (never delete: tenants reference them). Changes apply from each tenant's next request. */
export function planRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.get("/", async (c) => {
    const rows = await database(c.env.DB).select().from(plans).orderBy(asc(plans.createdAt), asc(plans.id));
    return c.json({ object: "list" as const, data: rows.map(planView) });
  });

  routes.get("/:planId", async (c) => {
    const id = c.req.param("planId");
    const plan = await database(c.env.DB).select().from(plans).where(eq(plans.id, id)).get();
    if (!plan) throw planNotFound(id);
    return c.json(planView(plan));
  });

  routes.post("/", async (c) => {
    const body = await readJsonBody(c.req.raw, CreatePlanBody, { maxBytes: ADMIN_BODY_BYTES });
    const now = Date.now();
    const plan: Plan = {
      id: body.id,
      name: body.name,
      rpm: body.rpm,
      tpm: body.tpm,
      maxConcurrent: body.max_concurrent,
      maxActivePrograms: body.max_active_programs,
      monthlyTokenBudget: body.monthly_token_budget,
      defaultMaxTokens: body.default_max_tokens,
      maxOutputTokens: body.max_output_tokens,
      allowedExtensions: body.allowed_extensions,
      toolEventsPerMinute: body.tool_events_per_minute,
      limiterShards: body.limiter_shards,
      weight: body.weight,
      createdAt: now,
      updatedAt: now,
      allowedModels: body.allowed_models,
      allowedRegions: body.allowed_regions,
    };
    const inserted = await database(c.env.DB).insert(plans).values(plan).onConflictDoNothing().returning({ id: plans.id });
    if (inserted.length === 0) {
      throw openAIError(409, `Plan ${plan.id} already exists; update it with PATCH /admin/plans/${plan.id}.`, {
        code: "plan_exists",
        param: "id",
      });
    }
    return c.json(planView(plan), 201);
  });

  routes.patch("/:planId", async (c) => {
    const id = c.req.param("planId");
    const body = await readJsonBody(c.req.raw, UpdatePlanBody, { maxBytes: ADMIN_BODY_BYTES });
    const updated = await database(c.env.DB)
      .update(plans)
      .set({
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.rpm !== undefined ? { rpm: body.rpm } : {}),
        ...(body.tpm !== undefined ? { tpm: body.tpm } : {}),
        ...(body.max_concurrent !== undefined ? { maxConcurrent: body.max_concurrent } : {}),
        ...(body.max_active_programs !== undefined ? { maxActivePrograms: body.max_active_programs } : {}),
        ...(body.monthly_token_budget !== undefined ? { monthlyTokenBudget: body.monthly_token_budget } : {}),
        ...(body.default_max_tokens !== undefined ? { defaultMaxTokens: body.default_max_tokens } : {}),
        ...(body.max_output_tokens !== undefined ? { maxOutputTokens: body.max_output_tokens } : {}),
        ...(body.allowed_extensions !== undefined ? { allowedExtensions: body.allowed_extensions } : {}),
        ...(body.tool_events_per_minute !== undefined ? { toolEventsPerMinute: body.tool_events_per_minute } : {}),
        ...(body.limiter_shards !== undefined ? { limiterShards: body.limiter_shards } : {}),
        ...(body.weight !== undefined ? { weight: body.weight } : {}),
        ...(body.allowed_models !== undefined ? { allowedModels: body.allowed_models } : {}),
        ...(body.allowed_regions !== undefined ? { allowedRegions: body.allowed_regions } : {}),
        updatedAt: Date.now(),
      })
      .where(eq(plans.id, id))
      .returning();
    const plan = updated[0];
    if (!plan) throw planNotFound(id);
    await refreshTenantProfiles(c.env, await tenantsOnPlan(database(c.env.DB), id));
    return c.json(planView(plan));
  });

  return routes;
}
