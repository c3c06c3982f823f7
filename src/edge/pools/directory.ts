import { asc } from "drizzle-orm";
import type { Database } from "../db/client.js";
import { type Plan, type Pool, type PoolStatus, pools } from "../db/schema.js";

/*
 * The pool directory: which pools may serve a tenant's call for a model, and which
 * models a tenant may call. Pure functions over the `pools` rows and the tenant's
 * plan; `readPools` is the one place the rows are read, so a cache can go in front
 * of it without touching the callers.
 */

/** A plan's restrictions: null means none (any model, any region). */
export type ModelAccess = Pick<Plan, "allowedModels" | "allowedRegions">;

/** What the directory needs of a pool row. */
export type DirectoryPool = Pick<Pool, "id" | "region" | "models" | "status" | "createdAt">;

/** A model a tenant may call, with the time the first pool still serving it was added (ms). */
export interface CallableModel {
  id: string;
  createdAt: number;
}

/** The whole directory, ordered by pool ID. D1 is read on every call of this (no cache yet). */
export function readPools(db: Database): Promise<Pool[]> {
  return db.select().from(pools).orderBy(asc(pools.id));
}

/** The statuses of a pool that still serves calls. */
export type ServingStatus = Exclude<PoolStatus, "disabled">;

const allows = (list: readonly string[] | null, name: string) => list === null || list.includes(name);

/**
 * A pool that may serve the tenant at all: not disabled (a draining pool still serves
 * the programs it already has) and in a region the plan allows.
 */
function servesTenant<P extends DirectoryPool>(pool: P, access: ModelAccess): pool is P & { status: ServingStatus } {
  return pool.status !== "disabled" && allows(access.allowedRegions, pool.region);
}

/**
 * The pools that may serve `model` for a tenant on a plan with `access`, in the order
 * given: active or draining, serving the model, in an allowed region. Empty when the
 * plan does not allow the model. Choosing among them (weight; a draining pool only
 * for the programs it already has) is the caller's (`pool-choice.ts` takes them as
 * its options).
 */
export function eligiblePools<P extends DirectoryPool>(
  rows: readonly P[],
  access: ModelAccess,
  model: string,
): (P & { status: ServingStatus })[] {
  if (!allows(access.allowedModels, model)) return [];
  return rows.filter((pool): pool is P & { status: ServingStatus } => servesTenant(pool, access) && pool.models.includes(model));
}

/**
 * The models a tenant may call, sorted by name: allowed by its plan and served by at
 * least one pool eligible for it (so `eligiblePools` of each is non-empty, and of any
 * other model empty).
 */
export function callableModels(rows: readonly DirectoryPool[], access: ModelAccess): CallableModel[] {
  const models = new Map<string, number>();
  for (const pool of rows) {
    if (!servesTenant(pool, access)) continue;
    for (const model of pool.models) {
      if (!allows(access.allowedModels, model)) continue;
      const seen = models.get(model);
      if (seen === undefined || pool.createdAt < seen) models.set(model, pool.createdAt);
    }
  }
  return [...models]
    .map(([id, createdAt]) => ({ id, createdAt }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}
