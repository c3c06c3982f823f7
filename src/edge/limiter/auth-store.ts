import { type TenantKey, TenantProfile } from "../auth/tenant-profile.js";
import { hash53 } from "../../core/tao/signature.js";
import { ShardHistory } from "../durable/shard-history.js";

/*
 * What a TenantLimiter holds to authenticate its tenant's calls (its own SQLite, next
 * to the buckets and leases): the tenant's profile (plan limits with overrides, weight,
 * extensions, model access) and the SHA-256 of each of its keys. Loaded from D1 by the
 * object itself (tenant-limiter.ts); every method is synchronous, so a caller composes
 * them into one transaction.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS tenant_profile (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  json TEXT NOT NULL,
  version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tenant_keys (
  key_hash TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  revoked_at INTEGER,
  last_used_at INTEGER
);
`;

export interface StoredProfile {
  profile: TenantProfile;
  /** Bumped whenever the profile changes: an isolate's cached copy names the version it is. */
  version: number;
}

export type KeyCheck = { ok: true; keyId: string; lastUsedAt: number | null } | { ok: false };

/** A profile's version: the 53-bit cyrb53 hash of its JSON (a collision only makes one stale isolate copy look current). */
export function profileVersionOf(json: string): number {
  return Number.parseInt(hash53(json), 16);
}

export class AuthStore {
  private readonly shards: ShardHistory;

  constructor(private readonly sql: SqlStorage) {
    this.shards = new ShardHistory(sql);
  }

  initialise(): void {
    this.sql.exec(SCHEMA);
    this.shards.ensureSchema();
  }

  profile(): StoredProfile | undefined {
    const row = this.sql.exec<{ json: string; version: number }>("SELECT json, version FROM tenant_profile WHERE id = 1").toArray()[0];
    if (!row) return undefined;
    const parsed = TenantProfile.safeParse(JSON.parse(row.json));
    return parsed.success ? { profile: parsed.data, version: row.version } : undefined;
  }

  /**
   * Stores the profile; the version moves only when it changed. The version is a hash of
   * the profile, not a counter, so every shard of a sharded tenant (shards.ts) holding the
   * same profile names the same version: an isolate's cached version is right on all of
   * them (a counter would differ per shard and refuse every other call as profile_changed).
   */
  writeProfile(profile: TenantProfile): StoredProfile {
    const json = JSON.stringify(profile);
    const version = profileVersionOf(json);
    const current = this.sql.exec<{ json: string; version: number }>("SELECT json, version FROM tenant_profile WHERE id = 1").toArray()[0];
    if (current?.json === json && current.version === version) return { profile, version };
    this.sql.exec("INSERT OR REPLACE INTO tenant_profile (id, json, version) VALUES (1, ?, ?)", json, version);
    return { profile, version };
  }

  /** Adds keys and their revocations; a revocation is never undone (the earliest time stays). */
  writeKeys(keys: readonly TenantKey[]): void {
    for (const key of keys) {
      this.sql.exec(
        `INSERT INTO tenant_keys (key_hash, key_id, revoked_at) VALUES (?, ?, ?)
         ON CONFLICT (key_hash) DO UPDATE SET revoked_at = COALESCE(MIN(revoked_at, excluded.revoked_at), revoked_at, excluded.revoked_at)`,
        key.hash,
        key.id,
        key.revokedAt,
      );
    }
  }

  /** The most shards any profile this object stored gave the tenant (shards.ts): where a call may have been admitted. */
  mostShards(): number {
    return this.shards.mostShards();
  }

  noteShards(count: number): void {
    this.shards.noteShards(count);
  }

  checkKey(keyHash: string): KeyCheck {
    const row = this.sql
      .exec<{ key_id: string; revoked_at: number | null; last_used_at: number | null }>(
        "SELECT key_id, revoked_at, last_used_at FROM tenant_keys WHERE key_hash = ?",
        keyHash,
      )
      .toArray()[0];
    if (!row || row.revoked_at !== null) return { ok: false };
    return { ok: true, keyId: row.key_id, lastUsedAt: row.last_used_at };
  }

  markUsed(keyHash: string, at: number): void {
    this.sql.exec("UPDATE tenant_keys SET last_used_at = ? WHERE key_hash = ?", at, keyHash);
  }
}
