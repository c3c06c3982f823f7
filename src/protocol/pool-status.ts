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
