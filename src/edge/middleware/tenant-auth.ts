import { and, eq, isNull } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import { openAIError } from "../../protocol/errors.js";
import { AnthropicHeader } from "../../protocol/headers.js";
import type { EdgeEnv } from "../context.js";
import { database } from "../db/client.js";
import { apiKeys, plans, tenants } from "../db/schema.js";
import { bearerToken } from "../http/bearer.js";
import { API_KEY_PATTERN, hashApiKey } from "../keys.js";
import { effectiveExtensions, effectiveLimits, effectiveWeight } from "../limits/plan-limits.js";

const nonEmpty = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value.trim());

/** last_used_at is a hint, not an audit log: refresh it at most this often. */
export const LAST_USED_GRANULARITY_MS = 60_000;

const MISSING_KEY =
  "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY), " +
  "or in x-api-key as Anthropic's clients do.";
const INVALID_KEY = "Incorrect API key provided.";

const unauthenticated = (message: string) =>
  openAIError(401, message, { type: "authentication_error", code: "invalid_api_key" });

/**
 * Authenticates a tenant by API key: looked up by its SHA-256 in D1 on every
 * request, together with the tenant's plan and overrides. There is no cache
 * (staleness bound 0): a revoked key stops working, and a plan change applies,
 * from the very next request. A wrong key and a revoked one get the same answer.
 */
export function tenantAuth() {
  return createMiddleware<EdgeEnv>(async function tenantAuth(c, next) {
    // Bearer first (OpenAI's clients); Anthropic's send x-api-key.
    const key = bearerToken(c.req.header("authorization")) ?? nonEmpty(c.req.header(AnthropicHeader.apiKey));
    if (key === undefined) throw unauthenticated(MISSING_KEY);
    if (!API_KEY_PATTERN.test(key)) throw unauthenticated(INVALID_KEY);
    const db = database(c.env.DB);
    const found = await db
      .select({ key: { id: apiKeys.id, lastUsedAt: apiKeys.lastUsedAt }, tenant: tenants, plan: plans })
      .from(apiKeys)
      .innerJoin(tenants, eq(tenants.id, apiKeys.tenantId))
      .leftJoin(plans, eq(plans.id, tenants.planId))
      .where(and(eq(apiKeys.keyHash, await hashApiKey(key)), isNull(apiKeys.revokedAt)))
      .get();
    if (!found) throw unauthenticated(INVALID_KEY);
    const { tenant, plan } = found;
    if (!plan) {
      console.error(`Tenant ${tenant.id} is on plan "${tenant.planId}", which does not exist.`);
      throw openAIError(500, "Your account's plan is misconfigured; contact support.", { code: "plan_missing" });
    }

    const now = Date.now();
    if (found.key.lastUsedAt === null || now - found.key.lastUsedAt >= LAST_USED_GRANULARITY_MS) {
      c.executionCtx.waitUntil(
        db
          .update(apiKeys)
          .set({ lastUsedAt: now })
          .where(eq(apiKeys.id, found.key.id))
          .run()
          .then(
            () => undefined,
            (error: unknown) => console.error("last_used_at update failed", error),
          ),
      );
    }
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
    await next();
  });
}
