import { asc, eq } from "drizzle-orm";
import { Hono } from "hono";
import { openAIError } from "../../../protocol/errors.js";
import { newTenantId } from "../../../protocol/ids.js";
import type { EdgeEnv } from "../../context.js";
import { type Database, database } from "../../db/client.js";
import { DEFAULT_PLAN_ID, plans, type Tenant, tenants } from "../../db/schema.js";
import { refreshTenantProfiles } from "../../auth/push.js";
import { readJsonBody } from "../../http/body.js";
import { ADMIN_BODY_BYTES, CreateTenantBody, TenantOverridesBody, UpdateTenantBody } from "./bodies.js";
import { tenantLedger } from "./tenant-ledger.js";
import { tenantView } from "./views.js";

export const tenantNotFound = (id: string) =>
  openAIError(404, `Tenant ${id} not found.`, { code: "tenant_not_found", param: "tenant_id" });

const unknownPlan = (id: string) =>
  openAIError(400, `Plan ${id} does not exist; list plans with GET /admin/plans.`, { code: "unknown_plan", param: "plan" });

async function requirePlan(db: Database, id: string) {
  const plan = await db.select().from(plans).where(eq(plans.id, id)).get();
  if (!plan) throw unknownPlan(id);
  return plan;
}

async function tenantWithPlan(db: Database, id: string) {
  const row = await db.select().from(tenants).leftJoin(plans, eq(plans.id, tenants.planId)).where(eq(tenants.id, id)).get();
  if (!row) throw tenantNotFound(id);
  return tenantView(row.tenants, row.plans);
}

/**
 * Tenants: create, list, read, update (name, weight multiplier, plan) and
 * per-tenant limit overrides. Changes apply from the tenant's next request: its
 * limiter reloads its profile before the answer (auth/push.ts).
 */
export function tenantRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.post("/", async (c) => {
    const body = await readJsonBody(c.req.raw, CreateTenantBody, { maxBytes: ADMIN_BODY_BYTES });
    const db = database(c.env.DB);
    const plan = await requirePlan(db, body.plan ?? DEFAULT_PLAN_ID);
    const tenant: Tenant = {
      id: newTenantId(),
      name: body.name,
      weight: body.weight ?? 1,
      createdAt: Date.now(),
      planId: plan.id,
      rpmOverride: null,
      tpmOverride: null,
      maxConcurrentOverride: null,
      maxActiveProgramsOverride: null,
      monthlyTokenBudgetOverride: null,
      defaultMaxTokensOverride: null,
      maxOutputTokensOverride: null,
      allowedExtensionsOverride: null,
      toolEventsPerMinuteOverride: null,
      limiterShardsOverride: null,
      programInference: true,
    };
    await db.insert(tenants).values(tenant);
    await refreshTenantProfiles(c.env, [tenant.id]);
    return c.json(tenantView(tenant, plan), 201);
  });

  routes.get("/", async (c) => {
    const rows = await database(c.env.DB)
      .select()
      .from(tenants)
      .leftJoin(plans, eq(plans.id, tenants.planId))
      .orderBy(asc(tenants.createdAt), asc(tenants.id));
    return c.json({ object: "list" as const, data: rows.map((row) => tenantView(row.tenants, row.plans)) });
  });

  routes.get("/:tenantId", async (c) => c.json(await tenantWithPlan(database(c.env.DB), c.req.param("tenantId"))));

  routes.get("/:tenantId/ledger", tenantLedger);

  routes.patch("/:tenantId", async (c) => {
    const id = c.req.param("tenantId");
    const body = await readJsonBody(c.req.raw, UpdateTenantBody, { maxBytes: ADMIN_BODY_BYTES });
    const db = database(c.env.DB);
    if (body.plan !== undefined) await requirePlan(db, body.plan);
    const updated = await db
      .update(tenants)
      .set({
        ...(body.name !== undefined ? { name: body.name } : {}),
        ...(body.weight !== undefined ? { weight: body.weight } : {}),
        ...(body.plan !== undefined ? { planId: body.plan } : {}),
        ...(body.program_inference !== undefined ? { programInference: body.program_inference } : {}),
      })
      .where(eq(tenants.id, id))
      .returning({ id: tenants.id });
    if (updated.length === 0) throw tenantNotFound(id);
    await refreshTenantProfiles(c.env, [id]);
    return c.json(await tenantWithPlan(db, id));
  });

  routes.patch("/:tenantId/overrides", async (c) => {
    const id = c.req.param("tenantId");
    const body = await readJsonBody(c.req.raw, TenantOverridesBody, { maxBytes: ADMIN_BODY_BYTES });
    const db = database(c.env.DB);
    const updated = await db
      .update(tenants)
      .set({
        ...(body.rpm !== undefined ? { rpmOverride: body.rpm } : {}),
        ...(body.tpm !== undefined ? { tpmOverride: body.tpm } : {}),
        ...(body.max_concurrent !== undefined ? { maxConcurrentOverride: body.max_concurrent } : {}),
        ...(body.max_active_programs !== undefined ? { maxActiveProgramsOverride: body.max_active_programs } : {}),
        ...(body.monthly_token_budget !== undefined ? { monthlyTokenBudgetOverride: body.monthly_token_budget } : {}),
        ...(body.default_max_tokens !== undefined ? { defaultMaxTokensOverride: body.default_max_tokens } : {}),
        ...(body.max_output_tokens !== undefined ? { maxOutputTokensOverride: body.max_output_tokens } : {}),
        ...(body.allowed_extensions !== undefined ? { allowedExtensionsOverride: body.allowed_extensions } : {}),
        ...(body.tool_events_per_minute !== undefined ? { toolEventsPerMinuteOverride: body.tool_events_per_minute } : {}),
        ...(body.limiter_shards !== undefined ? { limiterShardsOverride: body.limiter_shards } : {}),
      })
      .where(eq(tenants.id, id))
      .returning({ id: tenants.id });
    if (updated.length === 0) throw tenantNotFound(id);
    await refreshTenantProfiles(c.env, [id]);
    return c.json(await tenantWithPlan(db, id));
  });

  return routes;
}
