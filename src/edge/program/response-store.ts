/*
 * A program's stored Responses API responses, in its ProgramSession's SQLite: for
 * each response the conversation it added (its input items, then its output as input
 * items) and the response it continued, so a later `previous_response_id` gets the
 * whole conversation by walking back. Bounded: at most MAX_STORED_RESPONSES a program
 * (oldest dropped first), each at most MAX_RESPONSE_ITEMS_BYTES; dropped when the
 * program ends or expires, as OpenAI's store would drop them after its retention.
 */

export const MAX_STORED_RESPONSES = 256;
/** A response's own items (JSON); a larger one is not stored (continuing it is then 404). */
export const MAX_RESPONSE_ITEMS_BYTES = 1_048_576;
/** Responses a previous_response_id chain may span. */
export const MAX_RESPONSE_CHAIN = 1_024;

export const RESPONSE_SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  id TEXT PRIMARY KEY,
  parent TEXT,
  items TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  seq INTEGER NOT NULL
);
`;

type ResponseRow = { id: string; parent: string | null; items: string };

export class ResponseStore {
  constructor(private readonly sql: SqlStorage) {}

  /** Stores a response's items (false when they are too large to keep). Idempotent on the ID. */
  record(id: string, parent: string | null, items: readonly unknown[], now: number): boolean {
    const json = JSON.stringify(items);
    if (new TextEncoder().encode(json).byteLength > MAX_RESPONSE_ITEMS_BYTES) return false;
    const seq = (this.sql.exec<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM responses").one().seq ?? 0) + 1;
    this.sql.exec("INSERT OR IGNORE INTO responses (id, parent, items, created_at, seq) VALUES (?, ?, ?, ?, ?)", id, parent, json, now, seq);
    this.sql.exec("DELETE FROM responses WHERE id IN (SELECT id FROM responses ORDER BY seq DESC LIMIT -1 OFFSET ?)", MAX_STORED_RESPONSES);
    return true;
  }

  /**
   * The conversation up to and including response `id`, as a JSON array: every
   * response's items from the first of its chain (the stored arrays joined as text, not
   * parsed). Undefined when it (or one it continued) is not stored.
   */
  conversationJson(id: string): string | undefined {
    const chain: ResponseRow[] = [];
    let next: string | null = id;
    while (next !== null) {
      if (chain.length >= MAX_RESPONSE_CHAIN) return undefined;
      const row: ResponseRow | undefined = this.sql.exec<ResponseRow>("SELECT id, parent, items FROM responses WHERE id = ?", next).toArray()[0];
      if (row === undefined) return undefined;
      chain.push(row);
      next = row.parent;
    }
    // Each row holds a JSON array: its elements, without the brackets, join into one.
    const parts = chain.reverse().map((row) => row.items.slice(1, -1)).filter((inner) => inner.length > 0);
    return `[${parts.join(",")}]`;
  }

  clear(): void {
    this.sql.exec("DELETE FROM responses");
  }
}
