/*
 * A token bucket that refills continuously over one minute: capacity = the
 * per-minute limit, refill = limit / 60 s. It allows one full-limit burst and
 * then the steady rate, like a sliding window without storing every request.
 * Pure: time is passed in.
 */

export const RATE_WINDOW_MS = 60_000;

export interface Bucket {
  /** Units available now (may be negative after a call used more than it reserved). */
  level: number;
  /** When `level` was computed (ms). */
  at: number;
}

/** A bucket that has never been used is full. */
export function fullBucket(capacity: number, now: number): Bucket {
  return { level: capacity, at: now };
}

/** The bucket at `now`: refilled for the time since `at`, never above capacity. A clock going backwards refills nothing. */
export function refill(bucket: Bucket, capacity: number, now: number): Bucket {
  const elapsed = Math.max(0, now - bucket.at);
  const level = Math.min(capacity, bucket.level + (elapsed * capacity) / RATE_WINDOW_MS);
  return { level, at: Math.max(bucket.at, now) };
}

/** ms until the bucket holds `amount` (0 when it already does). */
export function msUntil(bucket: Bucket, capacity: number, amount: number): number {
  if (bucket.level >= amount) return 0;
  return Math.ceil(((amount - bucket.level) * RATE_WINDOW_MS) / capacity);
}

/** ms until the bucket is full again (OpenAI's "reset"). */
export function msUntilFull(bucket: Bucket, capacity: number): number {
  return msUntil(bucket, capacity, capacity);
}

/** Adds (or, negative, takes) units; never above capacity. */
export function adjust(bucket: Bucket, capacity: number, delta: number): Bucket {
  return { level: Math.min(capacity, bucket.level + delta), at: bucket.at };
}
