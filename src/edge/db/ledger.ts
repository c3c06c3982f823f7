import type { Database } from "./client.js";
import { type Program, programs, type UsageRow, usage } from "./schema.js";

/*
 * The D1 writes a program makes. Both are idempotent, so a retry after a failed
 * or repeated attempt can never count twice: usage rows are keyed by call ID,
 * and the program row carries absolute figures, not increments.
 *
 * They return the unexecuted statement, so the caller can await it or send
 * several in one `db.batch` (one round trip, one transaction, in order).
 */

export function recordUsage(db: Database, row: UsageRow) {
  return db.insert(usage).values(row).onConflictDoNothing({ target: usage.callId });
}

export function writeProgramSummary(db: Database, summary: Program) {
  const { id: _id, tenantId: _tenantId, createdAt: _createdAt, ...figures } = summary;
  return db.insert(programs).values(summary).onConflictDoUpdate({ target: programs.id, set: figures });
}

/** The statements of one `db.batch`: D1 wants at least one. */
export type LedgerWrite = ReturnType<typeof recordUsage> | ReturnType<typeof writeProgramSummary>;
