import type { Context } from "hono";
import { eq } from "drizzle-orm";
import { createMiddleware } from "hono/factory";
import type { HTTPException } from "hono/http-exception";
import { openAIError } from "../../protocol/errors.js";
import { AnthropicHeader } from "../../protocol/headers.js";
import { legacyKeyTenants, verifiedProfiles } from "../auth/isolate-cache.js";
import type { EdgeEnv } from "../context.js";
import { database } from "../db/client.js";
import { apiKeys } from "../db/schema.js";
import { bearerToken } from "../http/bearer.js";
import { hashApiKey, tenantNamedByKey } from "../keys.js";
import { tenantLimiter } from "../limiter/access.js";
import type { AuthRefusal } from "../limiter/types.js";
import { authenticateFromD1 } from "./baseline-auth.js";

const nonEmpty = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value.trim());

const MISSING_KEY =
  "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY), " +
  "or in x-api-key as Anthropic's clients do.";
const INVALID_KEY = "Incorrect API key provided.";

const unauthenticated = (message: string) =>
  openAIError(401, message, { type: "authentication_error", code: "invalid_api_key" });

/** A refused key: a wrong, revoked or unknown one all get the same answer. */
export function authRefused(refusal: AuthRefusal): HTTPException {
  if (refusal.refusal === "plan_missing") {
    return openAIError(500, "Your account's plan is misconfigured; contact support.", { code: "plan_missing" });
  }
  return unauthenticated(INVALID_KEY);
}

/** The tenant of a key issued before keys named it: one D1 read per isolate per key (the mapping never changes). */
async function legacyKeyTenant(c: Context<EdgeEnv>, keyHash: string): Promise<string | undefined> {
  const cached = legacyKeyTenants.get(keyHash);
  if (cached !== undefined) return cached;
  const row = await database(c.env.DB).select({ tenantId: apiKeys.tenantId }).from(apiKeys).where(eq(apiKeys.keyHash, keyHash)).get();
  if (row) legacyKeyTenants.set(keyHash, row.tenantId);
  return row?.tenantId;
}

/** api_keys.last_used_at, when the limiter says the key's last use was over a minute ago: off the request's path. */
export function noteKeyUsed(c: Context<EdgeEnv>, keyId: string, at: number): void {
  c.executionCtx.waitUntil(
    database(c.env.DB)
      .update(apiKeys)
      .set({ lastUsedAt: at })
      .where(eq(apiKeys.id, keyId))
      .run()
      .then(
        () => undefined,
        (error: unknown) => console.error("last_used_at update failed", error),
      ),
  );
}

/** Asks the tenant's limiter to verify the key (one round trip, no D1 read) and sets `tenant`. */
export async function verifyWithLimiter(c: Context<EdgeEnv>, tenantId: string, keyHash: string): Promise<void> {
  const now = Date.now();
  const answer = await tenantLimiter(c.env, tenantId).authenticate({ tenantId, keyHash, now });
  if (!answer.ok) {
    verifiedProfiles.delete(keyHash);
    throw authRefused(answer);
  }
  verifiedProfiles.set(keyHash, { tenant: answer.tenant, version: answer.version });
  if (answer.keyUsed) noteKeyUsed(c, answer.tenant.keyId, now);
  c.set("tenant", answer.tenant);
  c.set("credential", { tenantId, keyHash, profileVersion: answer.version, verified: true });
}

export interface TenantAuthOptions {
  /**
   * Requests whose own admission (TenantLimiter.admitCall with `auth`) verifies the key:
   * they start on the isolate's cached profile, when it has one, without a round trip.
   */
  verifiedAtAdmission(c: Context<EdgeEnv>): boolean;
}

/**
 * Authenticates a tenant by API key without reading D1: the key names its tenant (or,
 * for a key issued before keys did, the isolate looks its tenant up once), and that
 * tenant's limiter, which holds the tenant's profile and key hashes, verifies it. The
 * admin API reloads the limiter's copy after every change before it answers, so a
 * revoked key stops working, and a plan change applies, from the very next request
 * (staleness bound 0). A wrong key, a revoked one and an unknown tenant get the same answer.
 */
export function tenantAuth(options: TenantAuthOptions) {
  return createMiddleware<EdgeEnv>(async function tenantAuth(c, next) {
    // Bearer first (OpenAI's clients); Anthropic's send x-api-key.
    const key = bearerToken(c.req.header("authorization")) ?? nonEmpty(c.req.header(AnthropicHeader.apiKey));
    if (key === undefined) throw unauthenticated(MISSING_KEY);
    const named = tenantNamedByKey(key);
    if (named === undefined) throw unauthenticated(INVALID_KEY);
    const keyHash = await hashApiKey(key);
    const tenantId = named ?? (await legacyKeyTenant(c, keyHash));
    if (tenantId === undefined) throw unauthenticated(INVALID_KEY);

    if (c.var.config.baselineHotPath) {
      if (!(await authenticateFromD1(c, tenantId, keyHash))) throw unauthenticated(INVALID_KEY);
      return next();
    }
    const cached = options.verifiedAtAdmission(c) ? verifiedProfiles.get(keyHash) : undefined;
    if (cached !== undefined && cached.tenant.id === tenantId) {
      c.set("tenant", cached.tenant);
      c.set("credential", { tenantId, keyHash, profileVersion: cached.version, verified: false });
    } else {
      await verifyWithLimiter(c, tenantId, keyHash);
    }
    await next();
  });
}
