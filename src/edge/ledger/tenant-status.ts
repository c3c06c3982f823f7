import { openAIError } from "../../protocol/errors.js";
import type { Env } from "../env.js";
import { ledgerShard, usageLedger } from "./access.js";
import type { LedgerStatus } from "./types.js";
import type { UsageLedger } from "./usage-ledger.js";

/*
 * Reading what a tenant's ledger holds that D1 does not: rows still pending (the figures'
 * freshness) and rows D1 refused (quarantined: missing from the figures until D1 takes
 * them). GET /v1/usage reads its tenant's; the export reads every tenant's, TENANTS_AT_ONCE
 * at a time (one Durable Object call per tenant never sharded, one per shard otherwise).
 */

/** Tenants whose ledgers the export asks at once. */
const TENANTS_AT_ONCE = 32;

/** A tenant's ledger's (or several tenants') pending and quarantined items, added up. */
export interface LedgerHeld {
  /** When the oldest pending item began waiting (its call's settle); null: nothing pending. */
  oldestPendingAt: number | null;
  /** Usage rows quarantined: calls missing from the figures. */
  quarantinedRows: number;
  /** When the oldest quarantined row was refused first; null: none. */
  quarantinedSince: number | null;
}

export const NOTHING_HELD: LedgerHeld = { oldestPendingAt: null, quarantinedRows: 0, quarantinedSince: null };

const earliest = (a: number | null, b: number | null): number | null => (a === null ? b : b === null ? a : Math.min(a, b));

export function heldOf(statuses: readonly LedgerStatus[]): LedgerHeld {
  return statuses.reduce<LedgerHeld>(
    (held, status) => ({
      oldestPendingAt: earliest(held.oldestPendingAt, status.pending.oldestAt),
      quarantinedRows: held.quarantinedRows + status.quarantined.rows.count,
      quarantinedSince: earliest(held.quarantinedSince, status.quarantined.rows.since),
    }),
    NOTHING_HELD,
  );
}

/** The ledger did not answer: the figures' freshness is unknown, so the report is refused rather than overstated. */
function ledgerUnavailable(tenantId: string, error: unknown): Error {
  console.error(`reading tenant ${tenantId}'s usage ledger failed`, error);
  return openAIError(503, "The usage ledger did not answer, so the figures' freshness is unknown; retry.", { code: "ledger_unavailable" });
}

type LedgerStub = DurableObjectStub<UsageLedger>;

/**
 * Every ledger object of the tenant that can hold rows, with what it holds: shard 0 (the
 * tenant's one object), which also says how many shards the tenant ever used, then the
 * others, past a lowered N too (ledger/shards.ts). One call for a tenant never sharded.
 */
export async function tenantLedgerStatuses(env: Env, tenantId: string): Promise<{ shard: number; stub: LedgerStub; status: LedgerStatus }[]> {
  try {
    const first = usageLedger(env, tenantId);
    const status = await first.status();
    const others = await Promise.all(
      Array.from({ length: status.shards - 1 }, async (_, i) => {
        const stub = ledgerShard(env, tenantId, i + 1);
        return { shard: i + 1, stub, status: await stub.status() };
      }),
    );
    return [{ shard: 0, stub: first, status }, ...others];
  } catch (error) {
    throw ledgerUnavailable(tenantId, error);
  }
}

export async function tenantLedgerHeld(env: Env, tenantId: string): Promise<LedgerHeld> {
  return heldOf((await tenantLedgerStatuses(env, tenantId)).map((shard) => shard.status));
}

/** What the ledgers of all these tenants hold, added up. */
export async function tenantsLedgerHeld(env: Env, tenantIds: readonly string[]): Promise<LedgerHeld> {
  const statuses: LedgerStatus[] = [];
  for (let i = 0; i < tenantIds.length; i += TENANTS_AT_ONCE) {
    const chunk = tenantIds.slice(i, i + TENANTS_AT_ONCE);
    const answers = await Promise.all(chunk.map((tenantId) => tenantLedgerStatuses(env, tenantId)));
    for (const shards of answers) statuses.push(...shards.map((shard) => shard.status));
  }
  return heldOf(statuses);
}
