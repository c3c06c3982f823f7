import type { Entry, IndexEntries } from "../../core/recognition/conversation-index.js";

/*
 * The conversation index's entries in a Durable Object's SQLite: one row per prefix
 * hash, `used_at` ordering the least-recently-used eviction. Survives the object's
 * eviction from memory, so a tenant whose agents sit in long tool runs keeps them.
 */

export const INDEX_SCHEMA = `
CREATE TABLE IF NOT EXISTS conversation_entries (
  hash TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  program_id TEXT NOT NULL,
  thread TEXT NOT NULL,
  continued_by TEXT,
  forks INTEGER NOT NULL DEFAULT 0,
  used_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS conversation_entries_used_idx ON conversation_entries (used_at);
CREATE TABLE IF NOT EXISTS session_keys (
  key TEXT PRIMARY KEY,
  program_id TEXT NOT NULL,
  thread TEXT NOT NULL,
  used_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS session_keys_used_idx ON session_keys (used_at);
`;

type Row = { hash: string; kind: string; program_id: string; thread: string; continued_by: string | null; forks: number; used_at: number };

function entryOf(row: Row): Entry {
  if (row.kind === "failed") return { kind: "failed", programId: row.program_id, thread: row.thread, usedAt: row.used_at };
  return {
    kind: "end",
    programId: row.program_id,
    thread: row.thread,
    ...(row.continued_by === null ? {} : { continuedBy: row.continued_by }),
    forks: row.forks,
    usedAt: row.used_at,
  };
}

export class SqlEntries implements IndexEntries {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(INDEX_SCHEMA);
  }

  get size(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM conversation_entries").one().n;
  }

  get(hash: string): Entry | undefined {
    const row = this.sql.exec<Row>("SELECT * FROM conversation_entries WHERE hash = ?", hash).toArray()[0];
    return row === undefined ? undefined : entryOf(row);
  }

  put(hash: string, entry: Entry): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO conversation_entries (hash, kind, program_id, thread, continued_by, forks, used_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      hash,
      entry.kind,
      entry.programId,
      entry.thread,
      entry.kind === "end" ? (entry.continuedBy ?? null) : null,
      entry.kind === "end" ? entry.forks : 0,
      entry.usedAt,
    );
  }

  delete(hash: string): void {
    this.sql.exec("DELETE FROM conversation_entries WHERE hash = ?", hash);
  }

  touch(hash: string, entry: Entry): void {
    this.sql.exec("UPDATE conversation_entries SET used_at = ? WHERE hash = ?", entry.usedAt, hash);
  }

  forgetProgram(programId: string): void {
    this.sql.exec("DELETE FROM conversation_entries WHERE program_id = ?", programId);
  }

  trim(max: number): void {
    this.sql.exec(
      "DELETE FROM conversation_entries WHERE hash IN (SELECT hash FROM conversation_entries ORDER BY used_at DESC LIMIT -1 OFFSET ?)",
      max,
    );
  }
}
