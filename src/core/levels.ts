/*
 * Multi-level discretisation of a program's priority value (Autellix). Coarse levels
 * with geometrically growing bounds: a program changes level only a logarithmic
 * number of times as its service grows, so the order does not churn on every call.
 */

export interface LevelSettings {
  /** K >= 1 levels; level 0 is the highest priority. */
  levels: number;
  /** Level 0 holds values below this (ms). */
  firstBoundMs: number;
  /** Ratio between consecutive bounds (> 1). */
  growth: number;
}

export function validateLevelSettings(settings: LevelSettings): void {
  const { levels, firstBoundMs, growth } = settings;
  if (!Number.isInteger(levels) || levels < 1) {
    throw new RangeError(`levels must be an integer >= 1, got ${levels}`);
  }
  if (!Number.isFinite(firstBoundMs) || firstBoundMs <= 0) {
    throw new RangeError(`firstBoundMs must be a finite number > 0, got ${firstBoundMs}`);
  }
  if (!Number.isFinite(growth) || growth <= 1) {
    throw new RangeError(`growth must be a finite number > 1, got ${growth}`);
  }
}

/**
 * Level of a value: 0 for value < firstBoundMs, i for [first·growth^(i-1), first·growth^i),
 * K-1 (unbounded) for everything above. Bounds are built by repeated multiplication,
 * exactly as levelBounds() builds them, so both always agree at a bound. O(K).
 */
export function levelOf(valueMs: number, settings: LevelSettings): number {
  validateLevelSettings(settings);
  if (Number.isNaN(valueMs) || valueMs < 0) {
    throw new RangeError(`priority value must be a number >= 0, got ${valueMs}`);
  }
  let bound = settings.firstBoundMs;
  for (let level = 0; level < settings.levels - 1; level++) {
    if (valueMs < bound) return level;
    bound *= settings.growth;
  }
  return settings.levels - 1;
}

/** Upper (exclusive) bounds of levels 0..K-2; the last level has none. */
export function levelBounds(settings: LevelSettings): number[] {
  validateLevelSettings(settings);
  const bounds: number[] = [];
  let bound = settings.firstBoundMs;
  for (let level = 0; level < settings.levels - 1; level++) {
    bounds.push(bound);
    bound *= settings.growth;
  }
  return bounds;
}
