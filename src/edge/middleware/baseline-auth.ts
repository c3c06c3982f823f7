import type { Context } from "hono";
import { and, eq, isNull } from "drizzle-orm";
import type { EdgeEnv } from "../context.js";
import { database } from "../db/client.js";
import { apiKeys, plans, tenants } from "../db/schema.js";
import { effectiveExtensions, effectiveLimits, effectiveWeight } from "../limits/plan-limits.js";

/*
 * The edge's authentication before issue 14, kept only as bench:edge's baseline
 * (EDGE_BASELINE_HOT_PATH=1): the key, joined with its tenant and plan, read from D1
 * on every request. The hot path (tenant-auth.ts) reads nothing from D1.
 */

/** True when the key is valid: `tenant` is set, with the profile version 0 (the baseline admits by limits). */
export async function authenticateFromD1(c: Context<EdgeEnv>, tenantId: string, keyHash: string): Promise<boolean> {
  const found = await database(c.env.DB)
    .select({ key: { id: apiKeys.id }, tenant: tenants, plan: plans })
    .from(apiKeys)
    .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
    .innerJoin(plans, eq(plans.id, tenants.planId))
    .where(and(eq(apiKeys.keyHash, keyHash), isNull(apiKeys.revokedAt)))
    .get();
  if (!found || found.tenant.id !== tenantId) return false;
  const { tenant, plan } = found;
  c.set("tenant", {
    id: tenant.id,
    name: tenant.name,
    weight: effectiveWeight(plan.weight, tenant.weight),
    keyId: found.key.id,
    planId: plan.id,
    limits: effectiveLimits(plan, tenant),
    allowedExtensions: effectiveExtensions(plan, tenant),
    modelAccess: { allowedModels: plan.allowedModels, allowedRegions: plan.allowedRegions },
    programInference: tenant.programInference,
  });
  c.set("credential", { tenantId, keyHash, profileVersion: 0, verified: true });
  return true;
}
