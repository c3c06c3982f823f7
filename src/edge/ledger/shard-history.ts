/*
 * The most ledger shards a tenant ever used (ledger/shards.ts), in a ledger's own SQLite:
 * on shard 0 the tenant's (every shard tells it), elsewhere the most this shard told it.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS shard_history (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  most_shards INTEGER NOT NULL
);
`;

export class LedgerShardHistory {
  constructor(private readonly sql: SqlStorage) {}

  ensureSchema(): void {
    this.sql.exec(SCHEMA);
  }

  mostShards(): number {
    return this.sql.exec<{ most_shards: number }>("SELECT most_shards FROM shard_history WHERE id = 1").toArray()[0]?.most_shards ?? 1;
  }

  noteShards(count: number): void {
    this.sql.exec(
      "INSERT INTO shard_history (id, most_shards) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET most_shards = MAX(most_shards, excluded.most_shards)",
      count,
    );
  }
}
