import type { Context } from "hono";
import { eq } from "drizzle-orm";
import type { EdgeEnv } from "../../context.js";
import { database } from "../../db/client.js";
import { tenants } from "../../db/schema.js";
import { tenantLedgerStatuses } from "../../ledger/tenant-status.js";
import { tenantNotFound } from "./tenants.js";
import { LEDGER_ITEMS_SHOWN, type TenantLedgerObject } from "./views.js";

const earliest = (...times: (number | null)[]): number | null => {
  const known = times.filter((t): t is number => t !== null);
  return known.length > 0 ? Math.min(...known) : null;
};

/**
 * GET /admin/tenants/{id}/ledger: what the tenant's usage ledger holds that D1 does not,
 * per ledger object: pending items, and the quarantined ones (D1 refused them) with D1's
 * last error, so an operator can repair what D1 refuses.
 */
export async function tenantLedger(c: Context<EdgeEnv>): Promise<Response> {
  const id = c.req.param("tenantId") ?? "";
  const tenant = await database(c.env.DB).select({ id: tenants.id }).from(tenants).where(eq(tenants.id, id)).get();
  if (!tenant) throw tenantNotFound(id);
  const shards = await tenantLedgerStatuses(c.env, id);
  const items = await Promise.all(shards.map(async ({ shard, stub }) => (await stub.quarantined(LEDGER_ITEMS_SHOWN)).map((item) => ({ shard, item }))));
  const view: TenantLedgerObject = {
    object: "tenant.ledger",
    tenant_id: id,
    shards: shards.map(({ shard, status }) => ({
      shard,
      pending_rows: status.pending.rows,
      pending_summaries: status.pending.summaries,
      oldest_pending_at: status.pending.oldestAt,
      quarantined_rows: status.quarantined.rows.count,
      quarantined_summaries: status.quarantined.summaries.count,
      quarantined_since: earliest(status.quarantined.rows.since, status.quarantined.summaries.since),
    })),
    quarantined: items.flat().map(({ shard, item }) => ({
      shard,
      kind: item.kind,
      id: item.id,
      program_id: item.programId,
      since: item.since,
      attempts: item.attempts,
      next_attempt_at: item.nextAttemptAt,
      last_error: item.lastError,
    })),
  };
  return c.json(view);
}
