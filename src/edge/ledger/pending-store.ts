import type { LedgerItem } from "./items.js";
import { LedgerProgramSummary, LedgerUsageRow, summaryProgress } from "./types.js";

/*
 * A UsageLedger's own SQLite tables (ctx.storage.sql): the rows and program summaries
 * handed to it and not yet in D1. A row leaves only once D1 took its batch; a row handed
 * over twice is kept once (its call ID is the key), and D1 ignores one it already has.
 * `due_from` is when the row's wait began: its call's settle (or its arrival, if earlier
 * by the clocks), so a late hand-off does not stretch the ledger's delay.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS pending_usage (
  call_id TEXT PRIMARY KEY,
  due_from INTEGER NOT NULL,
  row_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_programs (
  program_id TEXT PRIMARY KEY,
  progress INTEGER NOT NULL,
  due_from INTEGER NOT NULL,
  summary_json TEXT NOT NULL
);
`;

export interface PendingSummary {
  summary: LedgerProgramSummary;
  progress: number;
}

export class LedgerPendingStore {
  constructor(private readonly sql: SqlStorage) {}

  /** Creates the tables if they are missing (idempotent; an empty ledger costs two empty tables). */
  ensureSchema(): void {
    this.sql.exec(SCHEMA);
  }

  /** Whether anything was ever handed to this ledger (a status read on a new object leaves no storage behind). */
  exists(): boolean {
    return this.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pending_usage'").toArray().length > 0;
  }

  addRow(row: LedgerUsageRow, receivedAt: number): void {
    this.sql.exec(
      "INSERT INTO pending_usage (call_id, due_from, row_json) VALUES (?, ?, ?) ON CONFLICT (call_id) DO NOTHING",
      row.callId,
      Math.min(row.finishedAt, receivedAt),
      JSON.stringify(row),
    );
  }

  /** Keeps the newest summary of each program (summaryProgress); an older one arriving late changes nothing. */
  putSummary(summary: LedgerProgramSummary, receivedAt: number): void {
    this.sql.exec(
      `INSERT INTO pending_programs (program_id, progress, due_from, summary_json) VALUES (?, ?, ?, ?)
       ON CONFLICT (program_id) DO UPDATE SET progress = excluded.progress, summary_json = excluded.summary_json
       WHERE excluded.progress > pending_programs.progress`,
      summary.id,
      summaryProgress(summary),
      receivedAt,
      JSON.stringify(summary),
    );
  }

  /** When the oldest pending row or summary began waiting; undefined when nothing is pending. */
  oldestDueFrom(): number | undefined {
    const row = this.sql
      .exec<{ t: number | null }>(
        "SELECT MIN(t) AS t FROM (SELECT MIN(due_from) AS t FROM pending_usage UNION ALL SELECT MIN(due_from) AS t FROM pending_programs)",
      )
      .toArray()[0];
    return row?.t ?? undefined;
  }

  private summaries(limit: number): PendingSummary[] {
    return this.sql
      .exec<{ progress: number; summary_json: string }>(
        "SELECT progress, summary_json FROM pending_programs ORDER BY due_from, program_id LIMIT ?",
        limit,
      )
      .toArray()
      .map((row) => ({ summary: LedgerProgramSummary.parse(JSON.parse(row.summary_json)), progress: row.progress }));
  }

  private rows(limit: number): LedgerUsageRow[] {
    return this.sql
      .exec<{ row_json: string }>("SELECT row_json FROM pending_usage ORDER BY due_from, call_id LIMIT ?", limit)
      .toArray()
      .map((row) => LedgerUsageRow.parse(JSON.parse(row.row_json)));
  }

  /** Pending items, summaries first (a usage row references its program's row), at most `limit`. */
  items(limit: number): LedgerItem[] {
    const summaries = this.summaries(limit).map((pending): LedgerItem => ({ kind: "program", ...pending }));
    const rows = summaries.length < limit ? this.rows(limit - summaries.length) : [];
    return [...summaries, ...rows.map((row): LedgerItem => ({ kind: "usage", row }))];
  }

  /** D1 holds these items (or they went to quarantine); a summary replaced meanwhile by a newer one stays. */
  remove(items: readonly LedgerItem[]): void {
    for (const item of items) {
      if (item.kind === "usage") this.sql.exec("DELETE FROM pending_usage WHERE call_id = ?", item.row.callId);
      else this.sql.exec("DELETE FROM pending_programs WHERE program_id = ? AND progress = ?", item.summary.id, item.progress);
    }
  }

  pendingCounts(): { rows: number; summaries: number } {
    const count = (table: string) => this.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).toArray()[0]?.n ?? 0;
    return { rows: count("pending_usage"), summaries: count("pending_programs") };
  }
}
