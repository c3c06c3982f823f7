import type { EdgeConfig } from "../env.js";
import { programHandOffWaitMs } from "../ledger/flush-schedule.js";
import { type LedgerHeld, NOTHING_HELD } from "../ledger/tenant-status.js";

/*
 * How far the ledger in D1 may be behind. A settled call's row waits in its program's
 * object and is handed to its tenant's UsageLedger by the program's alarm, half of
 * LEDGER_FLUSH_MS after the oldest pending row's settle (ledger/flush-schedule.ts
 * programHandOffWaitMs; at once when the program ends). The ledger sends it to D1 in one
 * batch LEDGER_FLUSH_MS after that settle (its wait counts from the settle, not the
 * arrival), or at once if the hand-off came later. So the row waits
 * max(LEDGER_FLUSH_MS, half + the program's alarm's lateness + the hand-off) + the
 * ledger's alarm's lateness: ALARM_SLACK_MS and HAND_OFF_SLACK_MS, allowed for, not measured.
 * Every call that settled before `data_as_of` is in the figures, unless a hand-off or
 * a D1 batch failed: the program retries its hand-off, the ledger its batch, each backing
 * off 2 s doubling to 30 s, until it goes through: never lost, never counted twice.
 * The baseline (EDGE_BASELINE_PROGRAM_LEDGER: each program batches its own rows) has no hand-off.
 *
 * What the ledger objects hold is read too (ledger/tenant-status.ts): a row still pending
 * there from before the bound (D1 down) moves `data_as_of` back to its settle, and rows D1
 * refused (quarantined, retried every 10 min: ledger/delivery.ts) are counted apart, since
 * when: every call settled before `data_as_of` is in the figures but those.
 */

export const ALARM_SLACK_MS = 1_000;
/** The settle's round trip to the program and the program's to its ledger, while both answer. */
export const HAND_OFF_SLACK_MS = 1_000;

export interface LedgerFreshness {
  /** Every call settled before this instant is counted (ISO 8601, UTC). */
  data_as_of: string;
  /** The most a settled call's row waits before it reaches D1 while the objects and D1 answer (ms). */
  ledger_delay_ms: number;
  /** Usage rows D1 refused, quarantined in the ledger and retried: calls not in the figures. */
  ledger_quarantined_rows: number;
  /** When the oldest of them was first refused (ISO 8601, UTC); null: none. */
  ledger_quarantined_since: string | null;
}

/** The bound itself (ms); 0 with LEDGER_FLUSH_MS 0: a row is in D1 before its settle is answered. */
export function ledgerDelayMs(config: Pick<EdgeConfig, "ledgerFlushMs" | "baselineProgramLedger">): number {
  if (config.ledgerFlushMs === 0) return 0;
  if (config.baselineProgramLedger) return config.ledgerFlushMs + ALARM_SLACK_MS;
  const handedOffBy = programHandOffWaitMs(config.ledgerFlushMs) + ALARM_SLACK_MS + HAND_OFF_SLACK_MS;
  return Math.max(config.ledgerFlushMs, handedOffBy) + ALARM_SLACK_MS;
}

/** The freshness of figures read now, given what the ledger objects hold (none read: nothing held). */
export function ledgerFreshness(config: EdgeConfig, now: number, held: LedgerHeld = NOTHING_HELD): LedgerFreshness {
  const delay = ledgerDelayMs(config);
  const asOf = Math.min(now - delay, held.oldestPendingAt ?? Number.POSITIVE_INFINITY);
  return {
    data_as_of: new Date(asOf).toISOString(),
    ledger_delay_ms: delay,
    ledger_quarantined_rows: held.quarantinedRows,
    ledger_quarantined_since: held.quarantinedSince === null ? null : new Date(held.quarantinedSince).toISOString(),
  };
}
