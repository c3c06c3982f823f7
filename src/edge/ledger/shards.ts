import { shardHash } from "../durable/shard-hash.js";
import { MAX_LIMITER_SHARDS } from "../limits/plan-limits.js";

/*
 * A tenant's usage ledger in N objects (ledger shards), so one tenant is not capped by
 * what one object serves (~1,000 hand-offs a second). N is the tenant's limiter shard
 * count (limiter/shards.ts shardCount: the plan's or the tenant's `limiter_shards`, capped
 * by rpm and concurrency): a tenant big enough to need its admissions split needs its
 * hand-offs split too, and one figure is one thing for an operator to set. The edge passes
 * it with every begin (program/types.ts BeginCallInput.ledgerShards); the program keeps the
 * last one.
 *
 * - A program hands off to shard hash(program ID) mod N: all of its rows and summaries go
 *   to one object while N holds, and its program row goes before its usage rows there.
 * - When a change of N moves a program to another shard, its next hand-off carries its
 *   summary again, so the new shard has the program row before the rows that reference it.
 *   Rows already on the old shard go to D1 from there. Nothing is lost or doubled: rows are
 *   keyed by call ID in D1 (a row handed to two shards is written once) and a summary only
 *   ever advances the program row.
 * - Shard 0 is the tenant's one object of before (idFromName(tenantId)), so N = 1 is that
 *   object, costing nothing more. Shard 0 remembers the most shards the tenant ever used
 *   (each shard tells it the first time it sees a larger N), so the freshness and
 *   quarantine reports read every shard that can hold rows, those past a lowered N too
 *   (the sharded limiter's shard 0 does the same for its leases).
 */

export const MAX_LEDGER_SHARDS = MAX_LIMITER_SHARDS;

/** The shard a program's usage goes to when its tenant has `count` ledger shards. */
export function ledgerShardOf(programId: string, count: number): number {
  return count <= 1 ? 0 : shardHash(programId) % count;
}
