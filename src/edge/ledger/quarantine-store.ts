import { isUsageItem, itemKey, type LedgerItem } from "./items.js";
import { LedgerProgramSummary, LedgerUsageRow } from "./types.js";

/*
 * The rows (and program summaries) D1 refused on their own while it answered
 * (delivery.ts), in the ledger's own SQLite: out of the pending batches, so the tenant's
 * other rows keep flowing, and never deleted but by D1 taking them. Each is tried again
 * at `next_attempt_at` (a slow schedule; at once when this ledger writes its program's
 * row, the likeliest cure). Keyed like the pending tables (call ID; program ID, keeping
 * the summary furthest along), so an item is here once however often it is refused, and
 * a row handed over again while it is here is not taken back into the pending batches.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS quarantine (
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  program_id TEXT NOT NULL,
  progress INTEGER NOT NULL,
  item_json TEXT NOT NULL,
  since INTEGER NOT NULL,
  attempts INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT NOT NULL,
  PRIMARY KEY (kind, key)
);
CREATE INDEX IF NOT EXISTS quarantine_next_idx ON quarantine (next_attempt_at);
`;

/** How many of a kind are quarantined, and since when the oldest (ms; null: none). */
export interface QuarantineCount {
  count: number;
  since: number | null;
}

export interface QuarantineCounts {
  /** Usage rows: calls missing from the figures until D1 takes them. */
  rows: QuarantineCount;
  /** Program rows. */
  summaries: QuarantineCount;
}

/** One quarantined item, for an operator. */
export interface QuarantinedItem {
  kind: LedgerItem["kind"];
  /** The call ID of a usage row, the program ID of a summary. */
  id: string;
  programId: string;
  since: number;
  attempts: number;
  nextAttemptAt: number;
  lastError: string;
}

type Row = {
  kind: string;
  key: string;
  program_id: string;
  progress: number;
  item_json: string;
  since: number;
  attempts: number;
  next_attempt_at: number;
  last_error: string;
};

export class LedgerQuarantineStore {
  constructor(private readonly sql: SqlStorage) {}

  ensureSchema(): void {
    this.sql.exec(SCHEMA);
  }

  holdsRow(callId: string): boolean {
    return this.sql.exec("SELECT 1 FROM quarantine WHERE kind = 'usage' AND key = ?", callId).toArray().length > 0;
  }

  /**
   * D1 refused the item (again): kept, with the error, until `retryAt`. A summary keeps the
   * one furthest along; `since` stays the first refusal.
   */
  refused(item: LedgerItem, error: string, now: number, retryAt: number): void {
    const progress = isUsageItem(item) ? 0 : item.progress;
    const json = JSON.stringify(isUsageItem(item) ? item.row : item.summary);
    this.sql.exec(
      `INSERT INTO quarantine (kind, key, program_id, progress, item_json, since, attempts, next_attempt_at, last_error)
       VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)
       ON CONFLICT (kind, key) DO UPDATE SET
         attempts = quarantine.attempts + 1,
         next_attempt_at = excluded.next_attempt_at,
         last_error = excluded.last_error,
         item_json = CASE WHEN excluded.progress > quarantine.progress THEN excluded.item_json ELSE quarantine.item_json END,
         progress = MAX(quarantine.progress, excluded.progress)`,
      item.kind,
      itemKey(item),
      isUsageItem(item) ? item.row.programId : item.summary.id,
      progress,
      json,
      now,
      retryAt,
      error,
    );
  }

  /** D1 holds these; a summary replaced meanwhile by one further along stays. */
  remove(items: readonly LedgerItem[]): void {
    for (const item of items) {
      if (isUsageItem(item)) this.sql.exec("DELETE FROM quarantine WHERE kind = 'usage' AND key = ?", item.row.callId);
      else this.sql.exec("DELETE FROM quarantine WHERE kind = 'program' AND key = ? AND progress = ?", item.summary.id, item.progress);
    }
  }

  /** The programs' quarantined rows are tried again at the next flush (D1 now holds their program's row). */
  dueNow(programIds: readonly string[]): void {
    for (const programId of programIds) {
      this.sql.exec("UPDATE quarantine SET next_attempt_at = 0 WHERE kind = 'usage' AND program_id = ? AND next_attempt_at > 0", programId);
    }
  }

  /** Items due by `now`, summaries first (a row references its program's row), oldest first. */
  due(now: number, limit: number): LedgerItem[] {
    return this.sql
      .exec<Row>("SELECT * FROM quarantine WHERE next_attempt_at <= ? ORDER BY kind = 'usage', since, key LIMIT ?", now, limit)
      .toArray()
      .map(itemOf);
  }

  /** When the next item is due; undefined when none is quarantined. */
  nextAttemptAt(): number | undefined {
    const row = this.sql.exec<{ t: number | null }>("SELECT MIN(next_attempt_at) AS t FROM quarantine").toArray()[0];
    return row?.t ?? undefined;
  }

  counts(): QuarantineCounts {
    const rows = this.sql
      .exec<{ kind: string; n: number; since: number | null }>("SELECT kind, COUNT(*) AS n, MIN(since) AS since FROM quarantine GROUP BY kind")
      .toArray();
    const of = (kind: string): QuarantineCount => {
      const row = rows.find((r) => r.kind === kind);
      return { count: row?.n ?? 0, since: row?.since ?? null };
    };
    return { rows: of("usage"), summaries: of("program") };
  }

  list(limit: number): QuarantinedItem[] {
    return this.sql
      .exec<Row>("SELECT * FROM quarantine ORDER BY since, kind, key LIMIT ?", limit)
      .toArray()
      .map((row) => ({
        kind: row.kind === "usage" ? "usage" : "program",
        id: row.key,
        programId: row.program_id,
        since: row.since,
        attempts: row.attempts,
        nextAttemptAt: row.next_attempt_at,
        lastError: row.last_error,
      }));
  }
}

function itemOf(row: Row): LedgerItem {
  const value: unknown = JSON.parse(row.item_json);
  return row.kind === "usage"
    ? { kind: "usage", row: LedgerUsageRow.parse(value) }
    : { kind: "program", summary: LedgerProgramSummary.parse(value), progress: row.progress };
}
