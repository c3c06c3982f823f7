/*
 * Recent tool durations, per tool name and across all tools. Estimates are medians:
 * tool times are lognormal with a heavy tail (reference/workloads-and-engines.md), and
 * one four-minute outlier should not make a 0.3 s tool look slow. Tool names come
 * from clients, so at most `maxTools` are kept; the least recently updated go first.
 */

/**
 * Fixed-size ring of the latest values, also kept in ascending order: the median is read
 * at every call's end (a prediction) and a value pushed at nearly every call's start, so
 * the order is kept up by one shift per push rather than a copy and sort of the whole
 * window per read (128 values, ~1.6 kB a call in the pool's allocation profile).
 */
class RecentValues {
  readonly #values: number[] = [];
  readonly #ascending: number[] = [];
  #next = 0;

  constructor(private readonly capacity: number) {}

  push(value: number): void {
    if (this.#values.length < this.capacity) this.#values.push(value);
    else {
      removeSorted(this.#ascending, this.#values[this.#next] as number);
      this.#values[this.#next] = value;
    }
    insertSorted(this.#ascending, value);
    this.#next = (this.#next + 1) % this.capacity;
  }

  get size(): number {
    return this.#values.length;
  }

  median(): number | undefined {
    const sorted = this.#ascending;
    if (sorted.length === 0) return undefined;
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  }
}

/** The first index of `sorted` whose value is greater than `value` (or equal, with `orEqual`). */
function boundary(sorted: readonly number[], value: number, orEqual: boolean): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    const at = sorted[mid] as number;
    if (at < value || (!orEqual && at === value)) low = mid + 1;
    else high = mid;
  }
  return low;
}

/*
 * The shifts are plain loops: V8's Array.prototype.copyWithin is generic (a property
 * lookup per element), ~2 µs for a 128-value window, and the pool shifts one at every
 * call's arrival.
 */
function insertSorted(sorted: number[], value: number): void {
  const at = boundary(sorted, value, false);
  let i = sorted.length;
  sorted.push(value);
  for (; i > at; i--) sorted[i] = sorted[i - 1] as number;
  sorted[at] = value;
}

/** Removes one occurrence of `value`, which `sorted` holds. */
function removeSorted(sorted: number[], value: number): void {
  const at = boundary(sorted, value, true);
  const last = sorted.length - 1;
  for (let i = at; i < last; i++) sorted[i] = sorted[i + 1] as number;
  sorted.pop();
}

export interface DurationHistorySizes {
  toolHistorySize: number;
  globalHistorySize: number;
  maxTools: number;
}

export class DurationHistory {
  readonly #byTool = new Map<string, RecentValues>();
  readonly #global: RecentValues;

  constructor(private readonly sizes: DurationHistorySizes) {
    this.#global = new RecentValues(sizes.globalHistorySize);
  }

  /** Records one observed duration (ms); negative or non-finite values are ignored. */
  record(tool: string, durationMs: number): void {
    if (!Number.isFinite(durationMs) || durationMs < 0) return;
    let values = this.#byTool.get(tool);
    if (values === undefined) {
      values = new RecentValues(this.sizes.toolHistorySize);
    } else {
      this.#byTool.delete(tool);
    }
    // Re-inserting keeps the Map in least-recently-updated order.
    this.#byTool.set(tool, values);
    values.push(durationMs);
    while (this.#byTool.size > this.sizes.maxTools) {
      const oldest = this.#byTool.keys().next().value;
      if (oldest === undefined) break;
      this.#byTool.delete(oldest);
    }
    this.#global.push(durationMs);
  }

  /** Median of the tool's recent durations, once it has `minSamples` of them. */
  toolEstimate(tool: string, minSamples: number): number | undefined {
    const values = this.#byTool.get(tool);
    return values !== undefined && values.size >= minSamples ? values.median() : undefined;
  }

  /** Median of recent durations across all tools, once there are `minSamples` of them. */
  globalEstimate(minSamples: number): number | undefined {
    return this.#global.size >= minSamples ? this.#global.median() : undefined;
  }

  samples(tool: string): number {
    return this.#byTool.get(tool)?.size ?? 0;
  }

  get toolCount(): number {
    return this.#byTool.size;
  }
}
