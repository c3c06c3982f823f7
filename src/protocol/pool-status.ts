import { z } from "zod";

/*
 * What a pool tells the edge about itself on `GET /v1/status` (signed like a call):
 * enough to choose between pools (health, models, load, free KV) without the
 * operator's metrics. Counts are the pool's own at `at` (its clock, ms).
 */

const count = z.int().nonnegative();

export const PoolStatus = z.strictObject({
  object: z.literal("pool.status"),
  /** "ok" while an engine is healthy (as /health). */
  status: z.enum(["ok", "degraded"]),
  /** The models the pool serves (its `models` list); null: it forwards any model name. */
  models: z.array(z.string().min(1)).nullable(),
  engines: z.strictObject({ total: count, healthy: count }),
  queue: z.strictObject({
    /** Calls waiting in the pool's queue. */
    queued: count,
    /** Calls on an engine. */
    running: count,
    /** Waiting calls per priority level (level 0 first), promotions applied. */
    by_level: z.array(count),
  }),
  /** KV tokens over the healthy engines: capacity, and what the admission account leaves free. */
  kv: z.strictObject({ capacity_tokens: count, free_tokens: count }),
  at: count,
});
export type PoolStatus = z.infer<typeof PoolStatus>;

/**
 * A pool's load as the edge compares pools: calls queued and running per healthy
 * engine (0 when none is healthy: such a pool is unhealthy, not idle). The status
 * answer and the `x-agentix-pool-load` header of every call's answer both carry it.
 */
export function loadPerHealthyEngine(queued: number, running: number, healthyEngines: number): number {
  return healthyEngines === 0 ? 0 : (queued + running) / healthyEngines;
}

/** The header's form: two decimals at most, never exponent form. */
export const formatPoolLoad = (load: number): string => String(Math.round(load * 100) / 100);

/** The header's value, or undefined when absent or not a load. */
export function parsePoolLoad(raw: string | null): number | undefined {
  if (raw === null || !/^\d+(\.\d+)?$/.test(raw)) return undefined;
  const load = Number(raw);
  return Number.isFinite(load) ? load : undefined;
}
