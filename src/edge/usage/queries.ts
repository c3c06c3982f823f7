import { and, asc, eq, gte, lt, sql } from "drizzle-orm";
import type { Database } from "../db/client.js";
import { tenants, usage } from "../db/schema.js";
import type { BillingPeriod } from "../limits/period.js";
import { type UsageFigures, usageFigures } from "./figures.js";

/*
 * Reads of the usage ledger. A call counts in the UTC day and billing period
 * of its settle time (finished_at), whatever its status: errored and cancelled
 * calls are billed for the work the engine did.
 */

const dayOfFinish = sql<string>`strftime('%Y-%m-%d', ${usage.finishedAt} / 1000, 'unixepoch')`;

export type UsageGrouping = "day" | "program";

export interface UsageGroup extends UsageFigures {
  key: string;
}

/** One tenant's usage in [fromMs, toMs), per day or per program, and its totals. */
export async function tenantUsage(
  db: Database,
  tenantId: string,
  range: { fromMs: number; toMs: number },
  groupBy: UsageGrouping,
): Promise<{ groups: UsageGroup[]; totals: UsageFigures }> {
  const where = and(eq(usage.tenantId, tenantId), gte(usage.finishedAt, range.fromMs), lt(usage.finishedAt, range.toMs));
  const key = groupBy === "day" ? dayOfFinish : sql<string>`${usage.programId}`;
  const [groups, totals] = await Promise.all([
    db
      .select({ key, ...usageFigures })
      .from(usage)
      .where(where)
      .groupBy(key)
      .orderBy(...(groupBy === "day" ? [asc(key)] : [asc(sql`min(${usage.finishedAt})`), asc(key)])),
    db.select(usageFigures).from(usage).where(where).get(),
  ]);
  return { groups, totals: totals ?? emptyFigures() };
}

export interface TenantPeriodUsage extends UsageFigures {
  tenantId: string;
  tenantName: string;
  planId: string;
}

/**
 * Every tenant's usage in one billing period (tenants without calls show
 * zeros), and the ledger's own totals for the period, computed by a separate
 * query so a mismatch would show.
 */
export async function periodUsage(
  db: Database,
  period: BillingPeriod,
): Promise<{ tenants: TenantPeriodUsage[]; totals: UsageFigures }> {
  const inPeriod = and(
    eq(usage.tenantId, tenants.id),
    gte(usage.finishedAt, period.startMs),
    lt(usage.finishedAt, period.endMs),
  );
  const [rows, totals] = await Promise.all([
    db
      .select({ tenantId: tenants.id, tenantName: tenants.name, planId: tenants.planId, ...usageFigures })
      .from(tenants)
      .leftJoin(usage, inPeriod)
      .groupBy(tenants.id)
      .orderBy(asc(tenants.createdAt), asc(tenants.id)),
    db
      .select(usageFigures)
      .from(usage)
      .where(and(gte(usage.finishedAt, period.startMs), lt(usage.finishedAt, period.endMs)))
      .get(),
  ]);
  return { tenants: rows, totals: totals ?? emptyFigures() };
}

export function emptyFigures(): UsageFigures {
  return { calls: 0, promptTokens: 0, cachedTokens: 0, completionTokens: 0, serviceMs: 0 };
}
