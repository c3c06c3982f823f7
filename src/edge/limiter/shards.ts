import { shardHash } from "../durable/shard-hash.js";
import type { TenantLimits } from "../limits/plan-limits.js";

/*
 * A sharded limiter: a tenant whose plan says limiter_shards N > 1 has its admissions
 * served by N TenantLimiter objects in parallel. What each shard holds:
 *
 * - rpm, tpm and concurrency: a static share, floor(x / N) plus one for the first x mod N
 *   shards, so the shares sum to the tenant's limit exactly. Static because these are
 *   rates and a slot count that refill or free on their own: a refused call walks on to
 *   the next shards (SHARD_WALK), so an uneven burst still gets the tenant's capacity.
 * - the monthly budget: NOT split statically. Shard 0 owns the budget and grants it to
 *   each shard (itself included) in chunks (Doorman-style capacity leases); a shard
 *   reserves against what it was granted. Grants are per shard index and per period, not
 *   per N, so a change of N cannot hand the same tokens out twice.
 *     Bound: shard 0 grants while Σ grants ≤ B, and each shard keeps the single object's
 *     invariant on its grant (settled + held ≤ granted at every admission), so the
 *     tenant's spend ≤ Σ granted ≤ B: exactly the single object's bound (B, plus only the
 *     engines' own overrun of a reservation), whatever N was or becomes in the period.
 *     A budget lowered mid-period below what was already granted: ≤ the grants made.
 * - active programs and tool events: shard 0 only (counted once).
 * - the tenant's profile and key hashes: every shard (the admin API reloads all N).
 *
 * A call's first shard is a hash of its call ID: call IDs are random, so calls spread
 * evenly whatever the number of isolates and with no state shared between them (an
 * isolate's round-robin would start every isolate on shard 0; an isolate's hash would put
 * a tenant served by one isolate on one shard). Renew, settle and cancel go to the shard
 * that granted the call (the edge holds its stub), so calls admitted under an old N settle
 * where their lease is.
 */

/** Shards a refused call tries in all (its first included): bounded, so a tenant at its limit costs at most this many round trips. */
export const SHARD_WALK = 4;

/** Budget chunks per shard share: a shard asks shard 0 for B / (N × this) (or what the call needs) when its grant is short. */
export const BUDGET_GRANT_SLICES = 4;

/**
 * The shards a tenant's limits are split into: the plan's limiter_shards, but never more
 * than its rpm or concurrency (each shard's share must be at least 1).
 */
export function shardCount(limits: Pick<TenantLimits, "limiterShards" | "rpm" | "tpm" | "maxConcurrent">): number {
  return Math.max(1, Math.min(limits.limiterShards, limits.rpm, limits.tpm, limits.maxConcurrent));
}

/** Shard `index`'s share of `total` split in `count`: the shares sum to total exactly. */
export function shareOf(total: number, index: number, count: number): number {
  return Math.floor(total / count) + (index < total % count ? 1 : 0);
}

/** The limits one shard admits by: its share of rpm, tpm and concurrency (the budget is granted, not split). */
export function shardLimits(limits: TenantLimits, index: number, count: number): TenantLimits {
  if (count <= 1) return limits;
  return {
    ...limits,
    rpm: shareOf(limits.rpm, index, count),
    tpm: shareOf(limits.tpm, index, count),
    maxConcurrent: shareOf(limits.maxConcurrent, index, count),
  };
}

/**
 * What shard 0 grants a shard that needs `need` tokens: a slice of what is left of the
 * budget, (budget − granted) / (N × BUDGET_GRANT_SLICES), at least `need`, never more than
 * is left. Slices shrink as the budget runs out, so little is stranded on shards that no
 * longer need it (a shard that was granted a slice keeps it until the period ends).
 */
export function budgetGrant(left: number, count: number, need: number): number {
  if (left <= 0) return 0;
  return Math.min(left, Math.max(need, Math.ceil(left / (count * BUDGET_GRANT_SLICES))));
}

/**
 * The shards a call tries, in order: its hash's shard, then the next ones, at most
 * SHARD_WALK. A call that starts a program tries shard 0 first (it counts programs).
 */
export function shardWalk(callId: string, count: number, startsProgram = false): number[] {
  const start = startsProgram ? 0 : shardHash(callId) % count;
  const walk: number[] = [];
  for (let step = 0; step < Math.min(count, SHARD_WALK); step++) walk.push((start + step) % count);
  return walk;
}
