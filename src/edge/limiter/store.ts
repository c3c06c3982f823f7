import type { Bucket } from "../limits/bucket.js";
import { TenantLimits } from "../limits/plan-limits.js";

/*
 * A TenantLimiter's own SQLite tables (ctx.storage.sql), behind typed
 * methods. Every method is synchronous, so a caller composes them into one
 * transaction. Schema changes: ALTER TABLE ADD COLUMN guarded by pragma
 * table_info, never a rebuild.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS buckets (
  name TEXT PRIMARY KEY,
  level REAL NOT NULL,
  at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS leases (
  call_id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reserved INTEGER NOT NULL,
  period TEXT NOT NULL,
  admitted_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  closed_at INTEGER
);
CREATE INDEX IF NOT EXISTS leases_state_expires_idx ON leases (state, expires_at);
CREATE INDEX IF NOT EXISTS leases_closed_idx ON leases (closed_at);
CREATE TABLE IF NOT EXISTS period_usage (
  period TEXT PRIMARY KEY,
  tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS programs (
  program_id TEXT PRIMARY KEY,
  admitted_at INTEGER NOT NULL
);
-- A sharded tenant (shards.ts): the budget this shard was granted per period, and, on shard 0, what it granted each shard.
CREATE TABLE IF NOT EXISTS budget_allowance (
  period TEXT PRIMARY KEY,
  tokens INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_grants (
  period TEXT NOT NULL,
  shard INTEGER NOT NULL,
  tokens INTEGER NOT NULL,
  PRIMARY KEY (period, shard)
);
CREATE TABLE IF NOT EXISTS limits (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  json TEXT NOT NULL
);
`;

/** requests / tokens: rpm and tpm; tool_events: the tenant-wide tool-event rate. */
export type BucketName = "requests" | "tokens" | "tool_events";

/**
 * active: holds a concurrency slot and its reservation. settled: actual usage
 * charged. expired: its edge never settled it within the lease (reservation no
 * longer held against the budget; a late settle still charges what it used).
 * cancelled: never reached the pool; request and reservation given back.
 */
export type LeaseState = "active" | "settled" | "expired" | "cancelled";

export interface Lease {
  callId: string;
  state: LeaseState;
  reserved: number;
  period: string;
  admittedAt: number;
  expiresAt: number;
  closedAt: number | null;
}

type LeaseRow = {
  call_id: string;
  state: string;
  reserved: number;
  period: string;
  admitted_at: number;
  expires_at: number;
  closed_at: number | null;
};

const toLease = (row: LeaseRow): Lease => ({
  callId: row.call_id,
  state: row.state as LeaseState,
  reserved: row.reserved,
  period: row.period,
  admittedAt: row.admitted_at,
  expiresAt: row.expires_at,
  closedAt: row.closed_at,
});

export class LimiterStore {
  constructor(private readonly sql: SqlStorage) {}

  initialise(): void {
    this.sql.exec(SCHEMA);
  }

  bucket(name: BucketName): Bucket | undefined {
    return this.sql.exec<{ level: number; at: number }>("SELECT level, at FROM buckets WHERE name = ?", name).toArray()[0];
  }

  writeBucket(name: BucketName, bucket: Bucket): void {
    this.sql.exec("INSERT OR REPLACE INTO buckets (name, level, at) VALUES (?, ?, ?)", name, bucket.level, bucket.at);
  }

  /** The limits of the latest admission (used to cap refunds at settle). */
  limits(): TenantLimits | undefined {
    const row = this.sql.exec<{ json: string }>("SELECT json FROM limits WHERE id = 1").toArray()[0];
    if (!row) return undefined;
    const parsed = TenantLimits.safeParse(JSON.parse(row.json));
    return parsed.success ? parsed.data : undefined;
  }

  writeLimits(limits: TenantLimits): void {
    this.sql.exec("INSERT OR REPLACE INTO limits (id, json) VALUES (1, ?)", JSON.stringify(limits));
  }

  lease(callId: string): Lease | undefined {
    const row = this.sql.exec<LeaseRow>("SELECT * FROM leases WHERE call_id = ?", callId).toArray()[0];
    return row ? toLease(row) : undefined;
  }

  addLease(lease: Omit<Lease, "state" | "closedAt">): void {
    this.sql.exec(
      "INSERT INTO leases (call_id, state, reserved, period, admitted_at, expires_at) VALUES (?, 'active', ?, ?, ?, ?)",
      lease.callId,
      lease.reserved,
      lease.period,
      lease.admittedAt,
      lease.expiresAt,
    );
  }

  closeLease(callId: string, state: Exclude<LeaseState, "active">, at: number): void {
    this.sql.exec("UPDATE leases SET state = ?, closed_at = ? WHERE call_id = ?", state, at, callId);
  }

  extendLease(callId: string, expiresAt: number): void {
    this.sql.exec(
      "UPDATE leases SET expires_at = MAX(expires_at, ?) WHERE call_id = ? AND state = 'active'",
      expiresAt,
      callId,
    );
  }

  activeLeaseCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM leases WHERE state = 'active'").one().n;
  }

  /** Tokens still reserved by active leases admitted in `period`. */
  reservedIn(period: string): number {
    return this.sql
      .exec<{ n: number }>("SELECT COALESCE(SUM(reserved), 0) AS n FROM leases WHERE state = 'active' AND period = ?", period)
      .one().n;
  }

  /** Marks every active lease whose time ran out as expired; returns how many. */
  expireLeases(now: number): number {
    return this.sql.exec(
      "UPDATE leases SET state = 'expired', closed_at = ? WHERE state = 'active' AND expires_at <= ?",
      now,
      now,
    ).rowsWritten;
  }

  earliestActiveExpiry(): number | undefined {
    return this.sql.exec<{ t: number | null }>("SELECT MIN(expires_at) AS t FROM leases WHERE state = 'active'").one().t ?? undefined;
  }

  oldestClosed(): number | undefined {
    return this.sql.exec<{ t: number | null }>("SELECT MIN(closed_at) AS t FROM leases WHERE state != 'active'").one().t ?? undefined;
  }

  purgeClosedBefore(at: number): void {
    this.sql.exec("DELETE FROM leases WHERE state != 'active' AND closed_at < ?", at);
  }

  periodUsage(period: string): number {
    return this.sql.exec<{ tokens: number }>("SELECT tokens FROM period_usage WHERE period = ?", period).toArray()[0]?.tokens ?? 0;
  }

  addPeriodUsage(period: string, tokens: number): void {
    this.sql.exec(
      "INSERT INTO period_usage (period, tokens) VALUES (?, ?) ON CONFLICT(period) DO UPDATE SET tokens = tokens + excluded.tokens",
      period,
      tokens,
    );
  }

  /** Periods are "YYYY-MM", so string order is time order. */
  purgePeriodsBefore(period: string): void {
    this.sql.exec("DELETE FROM period_usage WHERE period < ?", period);
  }

  /** Budget this shard was granted for `period` (a sharded tenant). */
  allowance(period: string): number {
    return this.sql.exec<{ tokens: number }>("SELECT tokens FROM budget_allowance WHERE period = ?", period).toArray()[0]?.tokens ?? 0;
  }

  addAllowance(period: string, tokens: number): void {
    this.sql.exec(
      "INSERT INTO budget_allowance (period, tokens) VALUES (?, ?) ON CONFLICT(period) DO UPDATE SET tokens = tokens + excluded.tokens",
      period,
      tokens,
    );
  }

  /** Shard 0: budget granted to all shards for `period`. */
  grantedIn(period: string): number {
    return this.sql.exec<{ n: number }>("SELECT COALESCE(SUM(tokens), 0) AS n FROM budget_grants WHERE period = ?", period).one().n;
  }

  addGrant(period: string, shard: number, tokens: number): void {
    this.sql.exec(
      "INSERT INTO budget_grants (period, shard, tokens) VALUES (?, ?, ?) ON CONFLICT(period, shard) DO UPDATE SET tokens = tokens + excluded.tokens",
      period,
      shard,
      tokens,
    );
  }

  /** Periods are "YYYY-MM": grants and allowances of periods before `period` are dropped. */
  purgeBudgetGrantsBefore(period: string): void {
    this.sql.exec("DELETE FROM budget_allowance WHERE period < ?", period);
    this.sql.exec("DELETE FROM budget_grants WHERE period < ?", period);
  }

  activeProgramCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM programs").one().n;
  }

  addProgram(programId: string, at: number): void {
    this.sql.exec("INSERT OR IGNORE INTO programs (program_id, admitted_at) VALUES (?, ?)", programId, at);
  }

  removeProgram(programId: string): void {
    this.sql.exec("DELETE FROM programs WHERE program_id = ?", programId);
  }

  programsAdmittedBy(at: number): string[] {
    return this.sql
      .exec<{ program_id: string }>("SELECT program_id FROM programs WHERE admitted_at <= ? ORDER BY admitted_at", at)
      .toArray()
      .map((row) => row.program_id);
  }
}
