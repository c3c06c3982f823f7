/*
 * Summaries of a sample for the benchmark report. Percentiles are nearest-rank (the
 * value at rank ⌈q·n⌉ of the sorted sample), as in the workload summaries, so every
 * reported figure is a value some program actually had.
 */

export interface Distribution {
  count: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** Nearest-rank quantile of an ascending sample; NaN when it is empty. */
export function nearestRank(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil(q * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function ascending(values: readonly number[]): Float64Array {
  return Float64Array.from(values).sort();
}

export function mean(values: ArrayLike<number>): number {
  if (values.length === 0) return Number.NaN;
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i] as number;
  return sum / values.length;
}

/** Mean and percentiles of a sample; null when the sample is empty (nothing to report). */
export function summarise(values: readonly number[]): Distribution | null {
  if (values.length === 0) return null;
  const sorted = ascending(values);
  return {
    count: sorted.length,
    mean: mean(sorted),
    p50: nearestRank(sorted, 0.5),
    p95: nearestRank(sorted, 0.95),
    p99: nearestRank(sorted, 0.99),
    max: sorted[sorted.length - 1] as number,
  };
}

/** `points` evenly spaced quantiles (0 … 1) of a sample, for plotting its CDF. */
export function quantilePoints(values: readonly number[], points: number): { q: number; value: number }[] {
  if (values.length === 0 || points < 2) return [];
  const sorted = ascending(values);
  const out: { q: number; value: number }[] = [];
  for (let i = 0; i < points; i++) {
    const q = i / (points - 1);
    out.push({ q, value: q === 0 ? (sorted[0] as number) : nearestRank(sorted, q) });
  }
  return out;
}
