/*
 * When a program's pending usage rows go to D1. Rows wait where they were settled (the
 * program's Durable Object storage, which survives eviction) and leave in one batch, so a
 * program making several calls within the window costs D1 one write for all of them.
 * This is Cloudflare's own batching pattern for alarms ("Use the Alarms API",
 * developers.cloudflare.com/durable-objects/examples/alarms-api/); alarms run at least once
 * and are retried when the handler throws (developers.cloudflare.com/durable-objects/api/alarms/),
 * and the batch is idempotent on the call ID, so a repeated run writes nothing twice.
 */

/** First retry after a failed batch; each further failure doubles it, up to LEDGER_RETRY_MAX_MS. */
export const LEDGER_RETRY_FIRST_MS = 2_000;
/** A D1 outage is retried at least this often by every program holding rows. */
export const LEDGER_RETRY_MAX_MS = 30_000;
/**
 * A row D1 refused while it answered (quarantined: ledger/delivery.ts) is tried again this
 * often: its program's row may reach D1 later (at once when this ledger writes it).
 */
export const QUARANTINE_RETRY_MS = 10 * 60_000;

export interface LedgerBacklog {
  /** When the oldest pending row's call finished. */
  oldestPendingAt: number;
  /** LEDGER_FLUSH_MS: how long a row may wait while D1 answers. */
  flushMs: number;
  /** Batches that failed in a row since the last one that went through (in memory: an evicted object starts over). */
  failures: number;
  lastFailureAt: number;
}

/** The time the next batch is due. */
export function ledgerFlushAt(backlog: LedgerBacklog): number {
  if (backlog.failures === 0) return backlog.oldestPendingAt + backlog.flushMs;
  const backoff = Math.min(LEDGER_RETRY_MAX_MS, LEDGER_RETRY_FIRST_MS * 2 ** (backlog.failures - 1));
  return backlog.lastFailureAt + backoff;
}

/**
 * How long a program holds its settled rows before handing them to its tenant's ledger:
 * half the window, so a program making several calls in it hands them off together. The
 * ledger counts its own wait from the rows' settle too (pending-store.ts `due_from`), so it
 * writes them LEDGER_FLUSH_MS after the settle: the halves add up to one window, not two.
 */
export function programHandOffWaitMs(flushMs: number): number {
  return Math.floor(flushMs / 2);
}
