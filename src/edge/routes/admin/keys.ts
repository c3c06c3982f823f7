import { and, asc, eq, isNull } from "drizzle-orm";
import { Hono } from "hono";
import { openAIError } from "../../../protocol/errors.js";
import { newKeyId } from "../../../protocol/ids.js";
import type { EdgeEnv } from "../../context.js";
import { database } from "../../db/client.js";
import { type ApiKey, apiKeys, tenants } from "../../db/schema.js";
import { readJsonBody } from "../../http/body.js";
import { refreshTenantProfiles } from "../../auth/push.js";
import { newApiKey } from "../../keys.js";
import { ADMIN_BODY_BYTES, CreateKeyBody } from "./bodies.js";
import { tenantNotFound } from "./tenants.js";
import { keyView } from "./views.js";

/**
 * API keys. A tenant may hold several active keys (rotate by creating the new
 * one, moving clients, then revoking the old). Revocation applies from the
 * next request: the tenant's limiter, which checks every key, reloads the tenant's keys
 * before the answer (auth/push.ts).
 */
export function keyRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.post("/tenants/:tenantId/keys", async (c) => {
    const tenantId = c.req.param("tenantId");
    const body = await readJsonBody(c.req.raw, CreateKeyBody, { maxBytes: ADMIN_BODY_BYTES, emptyAsObject: true });
    const db = database(c.env.DB);
    const tenant = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).get();
    if (!tenant) throw tenantNotFound(tenantId);
    const secret = await newApiKey(tenantId);
    const row: ApiKey = {
      id: newKeyId(),
      tenantId,
      keyHash: secret.hash,
      prefix: secret.prefix,
      name: body.name ?? null,
      createdAt: Date.now(),
      revokedAt: null,
      lastUsedAt: null,
    };
    await db.insert(apiKeys).values(row);
    await refreshTenantProfiles(c.env, [tenantId]);
    // The only time the key itself is ever shown.
    return c.json({ ...keyView(row), key: secret.key }, 201);
  });

  routes.get("/tenants/:tenantId/keys", async (c) => {
    const tenantId = c.req.param("tenantId");
    const db = database(c.env.DB);
    const tenant = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).get();
    if (!tenant) throw tenantNotFound(tenantId);
    const rows = await db
      .select()
      .from(apiKeys)
      .where(eq(apiKeys.tenantId, tenantId))
      .orderBy(asc(apiKeys.createdAt), asc(apiKeys.id));
    return c.json({ object: "list" as const, data: rows.map(keyView) });
  });

  /** Revokes a key at once; revoking again keeps the first revocation time. */
  routes.delete("/keys/:keyId", async (c) => {
    const keyId = c.req.param("keyId");
    const db = database(c.env.DB);
    await db
      .update(apiKeys)
      .set({ revokedAt: Date.now() })
      .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)));
    const row = await db.select().from(apiKeys).where(eq(apiKeys.id, keyId)).get();
    if (!row) throw openAIError(404, `API key ${keyId} not found.`, { code: "api_key_not_found", param: "key_id" });
    await refreshTenantProfiles(c.env, [row.tenantId]);
    return c.json(keyView(row));
  });

  return routes;
}
