import { getTableColumns, sql } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Database } from "./client.js";
import { type Program, programs, type UsageRow, usage } from "./schema.js";

/*
 * The D1 writes of the ledger. All are idempotent, so a retry after a failed
 * or repeated attempt can never count twice: usage rows are keyed by call ID,
 * and the program row carries absolute figures, not increments, and is only
 * replaced by one further along (a late write never takes a program back).
 *
 * They return the unexecuted statement, so the caller can await it or send
 * several in one `db.batch` (one round trip, one transaction, in order).
 */

/** D1 binds at most 100 parameters per statement (developers.cloudflare.com/d1/platform/limits/). */
const D1_MAX_BOUND_PARAMETERS = 100;

/** How many rows of `table` one multi-row insert can carry under D1's parameter limit. */
function rowsPerStatement(table: SQLiteTable): number {
  return Math.max(1, Math.floor(D1_MAX_BOUND_PARAMETERS / Object.keys(getTableColumns(table)).length));
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

export function recordUsage(db: Database, row: UsageRow) {
  return db.insert(usage).values(row).onConflictDoNothing({ target: usage.callId });
}

/**
 * Usage rows in multi-row inserts, each under D1's parameter limit, with the items each
 * carries; a call ID D1 already has is skipped.
 */
export function recordUsageRows<T>(db: Database, items: readonly T[], rowOf: (item: T) => UsageRow) {
  return chunks(items, rowsPerStatement(usage)).map((chunk) => ({
    write: db.insert(usage).values(chunk.map(rowOf)).onConflictDoNothing({ target: usage.callId }),
    items: chunk,
  }));
}

const { id: _id, tenantId: _tenantId, createdAt: _createdAt, ...figureColumns } = getTableColumns(programs);
/** ON CONFLICT: the figures of the row that was to be inserted. */
const excludedFigures = Object.fromEntries(
  Object.entries(figureColumns).map(([key, column]) => [key, sql.raw(`excluded."${column.name}"`)]),
);
/** Further along: more calls, or as many and no longer active (ledger/types.ts summaryProgress, in SQL). */
const furtherAlong = sql`excluded."calls" > ${programs.calls} OR (excluded."calls" = ${programs.calls} AND ${programs.status} = 'active' AND excluded."status" != 'active')`;

/** Program rows in multi-row upserts, each under D1's parameter limit, with the items each carries. */
export function writeProgramSummaries<T>(db: Database, items: readonly T[], summaryOf: (item: T) => Program) {
  return chunks(items, rowsPerStatement(programs)).map((chunk) => ({
    write: db
      .insert(programs)
      .values(chunk.map(summaryOf))
      .onConflictDoUpdate({ target: programs.id, set: excludedFigures, setWhere: furtherAlong }),
    items: chunk,
  }));
}

export function writeProgramSummary(db: Database, summary: Program) {
  return db.insert(programs).values(summary).onConflictDoUpdate({ target: programs.id, set: excludedFigures, setWhere: furtherAlong });
}

/** The statements of one `db.batch`: D1 wants at least one. */
export type LedgerWrite = ReturnType<typeof recordUsage> | ReturnType<typeof writeProgramSummary>;

/** Statements per D1 batch: one transaction, kept well inside D1's per-invocation query limit. */
export const D1_BATCH_MAX = 50;
