/*
 * Billing periods: calendar months in UTC, keyed "YYYY-MM". The usage ledger
 * bills a call in the period of its settle time (finished_at); the limiter
 * counts it against the same period.
 */

export const PERIOD_KEY = /^(\d{4})-(0[1-9]|1[0-2])$/;
export const DAY_KEY = /^(\d{4})-(\d{2})-(\d{2})$/;

export interface BillingPeriod {
  key: string;
  /** First ms of the period. */
  startMs: number;
  /** First ms after the period. */
  endMs: number;
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0");

function monthPeriod(year: number, monthIndex: number): BillingPeriod {
  return {
    key: `${pad(year, 4)}-${pad(monthIndex + 1)}`,
    startMs: Date.UTC(year, monthIndex, 1),
    endMs: Date.UTC(year, monthIndex + 1, 1),
  };
}

export function periodOf(ms: number): BillingPeriod {
  const date = new Date(ms);
  return monthPeriod(date.getUTCFullYear(), date.getUTCMonth());
}

/** The period named by "YYYY-MM", or undefined when it is not one. */
export function parsePeriod(key: string): BillingPeriod | undefined {
  const match = PERIOD_KEY.exec(key);
  if (!match) return undefined;
  return monthPeriod(Number(match[1]), Number(match[2]) - 1);
}

/** The first ms of the UTC day "YYYY-MM-DD", or undefined when it is no real date (2025-02-30). */
export function parseDay(key: string): number | undefined {
  const match = DAY_KEY.exec(key);
  if (!match) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const ms = Date.UTC(year, month - 1, day);
  const date = new Date(ms);
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined;
  return ms;
}

export const DAY_MS = 86_400_000;

export function dayKeyOf(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
