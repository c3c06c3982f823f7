import { eq } from "drizzle-orm";
import { Hono } from "hono";
import { openAIError } from "../../../protocol/errors.js";
import type { EdgeEnv } from "../../context.js";
import { type Database, database } from "../../db/client.js";
import { type Pool, type PoolStatus, pools } from "../../db/schema.js";
import { readJsonBody } from "../../http/body.js";
import { readPools } from "../../pools/directory.js";
import { poolMonitor, refreshPoolSnapshot } from "../../pools/directory-cache.js";
import type { PoolStatusReading } from "../../pools/monitor.js";
import type { Env } from "../../env.js";
import { ADMIN_BODY_BYTES, CreatePoolBody, UpdatePoolBody } from "./bodies.js";
import { poolView } from "./views.js";

export const poolNotFound = (id: string) =>
  openAIError(404, `Pool ${id} not found.`, { code: "pool_not_found", param: "pool_id" });

/** POST /admin/pools/{id}/{action}: the status each sets. */
const STATUS_ACTIONS: Record<string, PoolStatus> = { activate: "active", drain: "draining", disable: "disabled" };

type PoolFields = { region: string; url: string; models: string[]; weight: number; status: PoolStatus; signing_key_id: string };

/** The body's pool fields as columns; an absent one stays undefined, which drizzle leaves out of an UPDATE's SET. */
const poolColumns = <B extends Partial<PoolFields>>(
  body: B,
): { region: B["region"]; url: B["url"]; models: B["models"]; weight: B["weight"]; status: B["status"]; signingKeyId: B["signing_key_id"] } => ({
  region: body.region,
  url: body.url,
  models: body.models,
  weight: body.weight,
  status: body.status,
  signingKeyId: body.signing_key_id,
});

async function updatePool(db: Database, id: string, changes: Partial<Omit<Pool, "id" | "createdAt">>): Promise<Pool> {
  const updated = await db
    .update(pools)
    .set({ ...changes, updatedAt: Date.now() })
    .where(eq(pools.id, id))
    .returning();
  const pool = updated[0];
  if (!pool) throw poolNotFound(id);
  return pool;
}

/**
 * After a change: the monitor re-reads the directory, so new calls follow it at once
 * in this isolate and within a second in the others. A monitor that cannot be reached
 * now reads it on its next round; the change itself is already in D1.
 */
async function publishDirectory(env: Env): Promise<void> {
  await refreshPoolSnapshot(env).catch((error: unknown) =>
    console.error("the pool monitor did not take the directory change; it reads it on its next round", error),
  );
}

/** The monitor's readings; none (logged) when it cannot be asked: the directory still answers. */
async function monitorReadings(env: Env): Promise<Record<string, PoolStatusReading>> {
  try {
    return (await poolMonitor(env).snapshot()).readings;
  } catch (error) {
    console.error("the pool monitor could not be asked for its readings", error);
    return {};
  }
}

/**
 * The pool directory: list, read, add, update, and set a pool's status (activate,
 * drain: serve the programs it has but take no new ones, disable). Pools are not
 * deleted: disable one. Every change is published to the pool monitor before the
 * answer (publishDirectory).
 */
export function poolRoutes() {
  const routes = new Hono<EdgeEnv>();

  // The rows from D1 (the truth), with the monitor's last reading of each.
  routes.get("/", async (c) => {
    const [rows, readings] = await Promise.all([readPools(database(c.env.DB)), monitorReadings(c.env)]);
    return c.json({ object: "list" as const, data: rows.map((pool) => poolView(pool, readings[pool.id])) });
  });

  routes.get("/:poolId", async (c) => {
    const id = c.req.param("poolId");
    const pool = await database(c.env.DB).select().from(pools).where(eq(pools.id, id)).get();
    if (!pool) throw poolNotFound(id);
    return c.json(poolView(pool, (await monitorReadings(c.env))[id]));
  });

  routes.post("/", async (c) => {
    const body = await readJsonBody(c.req.raw, CreatePoolBody, { maxBytes: ADMIN_BODY_BYTES });
    const now = Date.now();
    const pool: Pool = { id: body.id, ...poolColumns(body), createdAt: now, updatedAt: now };
    const inserted = await database(c.env.DB).insert(pools).values(pool).onConflictDoNothing().returning({ id: pools.id });
    if (inserted.length === 0) {
      throw openAIError(409, `Pool ${pool.id} already exists; update it with PATCH /admin/pools/${pool.id}.`, {
        code: "pool_exists",
        param: "id",
      });
    }
    await publishDirectory(c.env);
    return c.json(poolView(pool), 201);
  });

  routes.patch("/:poolId", async (c) => {
    const body = await readJsonBody(c.req.raw, UpdatePoolBody, { maxBytes: ADMIN_BODY_BYTES });
    const pool = await updatePool(database(c.env.DB), c.req.param("poolId"), poolColumns(body));
    await publishDirectory(c.env);
    return c.json(poolView(pool));
  });

  routes.post("/:poolId/:action{activate|drain|disable}", async (c) => {
    const status = STATUS_ACTIONS[c.req.param("action")];
    if (status === undefined) return c.notFound();
    const pool = await updatePool(database(c.env.DB), c.req.param("poolId"), { status });
    await publishDirectory(c.env);
    return c.json(poolView(pool));
  });

  return routes;
}
