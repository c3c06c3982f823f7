/*
 * Checked values of a benchmark's string flags (node:util parseArgs gives strings):
 * each throws a message naming the flag, so a bad value never runs a benchmark.
 */

export function positiveNumber(flag: string, raw: string | undefined, fallback: number, max: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0 || value > max) {
    throw new Error(`--${flag} must be a number in (0, ${max}], got "${raw}"`);
  }
  return value;
}

export function positiveInt(flag: string, raw: string | undefined, fallback: number, max: number): number {
  const value = positiveNumber(flag, raw, fallback, max);
  if (!Number.isInteger(value)) throw new Error(`--${flag} must be an integer, got "${raw}"`);
  return value;
}

/** A comma-separated subset of `allowed` (all of it when unset). */
export function listOf<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[]): T[] {
  if (raw === undefined) return [...allowed];
  const items = raw.split(",").map((item) => item.trim()).filter(Boolean);
  const unknown = items.filter((item) => !(allowed as readonly string[]).includes(item));
  if (items.length === 0 || unknown.length > 0) {
    throw new Error(`--${flag} takes a comma-separated list of ${allowed.join(", ")}; got "${raw}"`);
  }
  // Canonical order, no duplicates: the report's rows follow it.
  return allowed.filter((name) => items.includes(name));
}

/** One of `allowed` (`fallback` when unset). */
export function oneOf<T extends string>(flag: string, raw: string | undefined, allowed: readonly T[], fallback: T): T {
  if (raw === undefined) return fallback;
  const value = allowed.find((name) => name === raw);
  if (value === undefined) throw new Error(`--${flag} takes one of ${allowed.join(", ")}; got "${raw}"`);
  return value;
}
