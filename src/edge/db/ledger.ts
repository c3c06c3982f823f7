import type { Database } from "./client.js";
import { type Program, programs, type UsageRow, usage } from "./schema.js";

/*
 * The two D1 writes a program makes. Both are idempotent, so a retry after a
 * failed or repeated attempt can never count twice: usage rows are keyed by call
 * ID, and the program row carries absolute figures, not increments.
 */

export async function recordUsage(db: Database, row: UsageRow): Promise<void> {
  await db.insert(usage).values(row).onConflictDoNothing({ target: usage.callId });
}

export async function writeProgramSummary(db: Database, summary: Program): Promise<void> {
  const { id: _id, tenantId: _tenantId, createdAt: _createdAt, ...figures } = summary;
  await db.insert(programs).values(summary).onConflictDoUpdate({ target: programs.id, set: figures });
}
