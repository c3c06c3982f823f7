import { and, asc, eq, isNull } from "drizzle-orm";
import { Hono } from "hono";
import { z } from "zod";
import { openAIError } from "../../protocol/errors.js";
import { newKeyId, newTenantId } from "../../protocol/ids.js";
import type { EdgeEnv } from "../context.js";
import { database } from "../db/client.js";
import { type ApiKey, apiKeys, type Tenant, tenants } from "../db/schema.js";
import { readJsonBody } from "../http/body.js";
import { newApiKey } from "../keys.js";
import { adminAuth } from "../middleware/admin-auth.js";

const CreateTenantBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  // Bounded so String(weight) never takes exponent form in the signed x-agentix-weight header.
  weight: z.number().finite().min(0.001).max(1_000).optional(),
});

const CreateKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(200).optional(),
});

/** Admin bodies are tiny; this caps them independently of MAX_BODY_BYTES. */
const ADMIN_BODY_BYTES = 16 * 1024;

const tenantView = (t: Tenant) => ({
  id: t.id,
  object: "tenant" as const,
  name: t.name,
  weight: t.weight,
  created_at: t.createdAt,
});

const keyView = (k: ApiKey) => ({
  id: k.id,
  object: "api_key" as const,
  tenant_id: k.tenantId,
  name: k.name,
  prefix: k.prefix,
  created_at: k.createdAt,
  revoked_at: k.revokedAt,
  last_used_at: k.lastUsedAt,
});

const tenantNotFound = (id: string) =>
  openAIError(404, `Tenant ${id} not found.`, { code: "tenant_not_found", param: "tenant_id" });

/** Tenants and their API keys. Mounted at /admin behind the admin token. */
export function adminRoutes() {
  const admin = new Hono<EdgeEnv>();
  admin.use(adminAuth());

  admin.post("/tenants", async (c) => {
    const body = await readJsonBody(c.req.raw, CreateTenantBody, { maxBytes: ADMIN_BODY_BYTES });
    const tenant: Tenant = { id: newTenantId(), name: body.name, weight: body.weight ?? 1, createdAt: Date.now() };
    await database(c.env.DB).insert(tenants).values(tenant);
    return c.json(tenantView(tenant), 201);
  });

  admin.get("/tenants", async (c) => {
    const rows = await database(c.env.DB).select().from(tenants).orderBy(asc(tenants.createdAt), asc(tenants.id));
    return c.json({ object: "list" as const, data: rows.map(tenantView) });
  });

  admin.post("/tenants/:tenantId/keys", async (c) => {
    const tenantId = c.req.param("tenantId");
    const body = await readJsonBody(c.req.raw, CreateKeyBody, { maxBytes: ADMIN_BODY_BYTES, emptyAsObject: true });
    const db = database(c.env.DB);
    const tenant = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.id, tenantId)).get();
    if (!tenant) throw tenantNotFound(tenantId);
    const secret = await newApiKey();
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
    // The only time the key itself is ever shown.
    return c.json({ ...keyView(row), key: secret.key }, 201);
  });

  admin.get("/tenants/:tenantId/keys", async (c) => {
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
  admin.delete("/keys/:keyId", async (c) => {
    const keyId = c.req.param("keyId");
    const db = database(c.env.DB);
    await db
      .update(apiKeys)
      .set({ revokedAt: Date.now() })
      .where(and(eq(apiKeys.id, keyId), isNull(apiKeys.revokedAt)));
    const row = await db.select().from(apiKeys).where(eq(apiKeys.id, keyId)).get();
    if (!row) throw openAIError(404, `API key ${keyId} not found.`, { code: "api_key_not_found", param: "key_id" });
    return c.json(keyView(row));
  });

  return admin;
}
