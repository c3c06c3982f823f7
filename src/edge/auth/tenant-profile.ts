import { eq } from "drizzle-orm";
import { z } from "zod";
import type { Database } from "../db/client.js";
import { apiKeys, plans, tenants } from "../db/schema.js";
import { effectiveExtensions, effectiveLimits, effectiveWeight, TenantLimits } from "../limits/plan-limits.js";

/*
 * What authenticating a tenant yields, held by the tenant's limiter object (its only
 * copy on a call's path) and loaded from D1 by that object: once when it has none, and
 * again whenever the admin API changes the tenant, its plan or its keys (auth/push.ts).
 */

export const TenantProfile = z.object({
  id: z.string().min(1),
  name: z.string(),
  /** Plan weight × tenant multiplier, for fair sharing in the pool (x-agentix-weight). */
  weight: z.number().positive(),
  planId: z.string().min(1),
  /** The plan's limits with the tenant's overrides applied. */
  limits: TenantLimits,
  /** Engine extensions the tenant may send beyond OpenAI's fields (its override, else its plan's). */
  allowedExtensions: z.array(z.string()),
  /** The models and regions its plan allows (null: any), for the pool directory. */
  modelAccess: z.object({ allowedModels: z.array(z.string()).nullable(), allowedRegions: z.array(z.string()).nullable() }),
  /** Calls without a program header may join a program by their conversation. */
  programInference: z.boolean(),
});
export type TenantProfile = z.infer<typeof TenantProfile>;

/** A key as the limiter checks it: by hash; revocation is final. */
export const TenantKey = z.object({ id: z.string().min(1), hash: z.string().min(1), revokedAt: z.number().nullable() });
export type TenantKey = z.infer<typeof TenantKey>;

export type LoadedTenant =
  | { found: true; profile: TenantProfile; keys: TenantKey[] }
  | { found: false }
  /** The tenant's plan row is missing: a misconfiguration the caller reports (500). */
  | { found: false; planMissing: string };

/** The tenant's profile and every key it was ever given, from D1 (two reads, in parallel). */
export async function loadTenant(db: Database, tenantId: string): Promise<LoadedTenant> {
  const [row, keys] = await Promise.all([
    db.select().from(tenants).leftJoin(plans, eq(plans.id, tenants.planId)).where(eq(tenants.id, tenantId)).get(),
    db.select({ id: apiKeys.id, hash: apiKeys.keyHash, revokedAt: apiKeys.revokedAt }).from(apiKeys).where(eq(apiKeys.tenantId, tenantId)),
  ]);
  if (!row) return { found: false };
  const { tenants: tenant, plans: plan } = row;
  if (!plan) return { found: false, planMissing: tenant.planId };
  return {
    found: true,
    profile: {
      id: tenant.id,
      name: tenant.name,
      weight: effectiveWeight(plan.weight, tenant.weight),
      planId: plan.id,
      limits: effectiveLimits(plan, tenant),
      allowedExtensions: effectiveExtensions(plan, tenant),
      modelAccess: { allowedModels: plan.allowedModels, allowedRegions: plan.allowedRegions },
      programInference: tenant.programInference,
    },
    keys,
  };
}
