import type { EdgeConfig } from "../env.js";

/*
 * How far the ledger in D1 may be behind: a settled call's row waits in its program's
 * object at most LEDGER_FLUSH_MS before its batch (ledger/flush-schedule.ts), plus the
 * alarm's own lateness (ALARM_SLACK_MS, allowed for, not measured). So every call that
 * settled before `data_as_of` is in the figures, unless D1 refused its batch (the program
 * retries it, backing off to 30 s, until D1 takes it: never lost, never counted twice).
 */

export const ALARM_SLACK_MS = 1_000;

export interface LedgerFreshness {
  /** Every call settled before this instant is counted (ISO 8601, UTC). */
  data_as_of: string;
  /** The most a settled call's row waits before it reaches D1 while D1 answers (ms). */
  ledger_delay_ms: number;
}

export function ledgerFreshness(config: EdgeConfig, now: number): LedgerFreshness {
  const delay = config.ledgerFlushMs === 0 ? 0 : config.ledgerFlushMs + ALARM_SLACK_MS;
  return { data_as_of: new Date(now - delay).toISOString(), ledger_delay_ms: delay };
}
