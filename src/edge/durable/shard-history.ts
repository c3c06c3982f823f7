/*
 * The most shards a tenant's sharded object ever had, in that object's own SQLite, so a
 * reader finds every shard that can still hold something after N was lowered: the
 * limiter's leases (limiter/shards.ts) and the usage ledger's rows (ledger/shards.ts).
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS shard_history (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  most_shards INTEGER NOT NULL
);
`;

export class ShardHistory {
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
