import type { Env } from "../env.js";
import { ledgerShardOf } from "./shards.js";
import type { UsageLedger } from "./usage-ledger.js";

/** The tenant's usage ledger: one object per tenant, named by its ID (shard 0 of a sharded ledger: shards.ts). */
export function usageLedger(env: Pick<Env, "USAGE_LEDGER">, tenantId: string): DurableObjectStub<UsageLedger> {
  return ledgerShard(env, tenantId, 0);
}

/** Shard `index` of the tenant's ledger: shard 0 is the tenant's one object, so a tenant made sharded keeps its rows there. */
export function ledgerShard(env: Pick<Env, "USAGE_LEDGER">, tenantId: string, index: number): DurableObjectStub<UsageLedger> {
  const name = index === 0 ? tenantId : `${tenantId}#shard-${index}`;
  return env.USAGE_LEDGER.get(env.USAGE_LEDGER.idFromName(name));
}

/** The ledger shard a program hands its rows to, with its index, when its tenant has `shards`. */
export function programLedger(env: Pick<Env, "USAGE_LEDGER">, tenantId: string, programId: string, shards: number) {
  const shard = ledgerShardOf(programId, shards);
  return { shard, stub: ledgerShard(env, tenantId, shard) };
}
