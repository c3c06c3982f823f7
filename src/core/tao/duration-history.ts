/*
 * Recent tool durations, per tool name and across all tools. Estimates are medians:
 * tool times are lognormal with a heavy tail (reference/workloads-and-engines.md), and
 * one four-minute outlier should not make a 0.3 s tool look slow. Tool names come
 * from clients, so at most `maxTools` are kept; the least recently updated go first.
 */

/** Fixed-size ring of the latest values. */
class RecentValues {
  readonly #values: number[] = [];
  #next = 0;

  constructor(private readonly capacity: number) {}

  push(value: number): void {
    if (this.#values.length < this.capacity) this.#values.push(value);
    else this.#values[this.#next] = value;
    this.#next = (this.#next + 1) % this.capacity;
  }

  get size(): number {
    return this.#values.length;
  }

  median(): number | undefined {
    if (this.#values.length === 0) return undefined;
    const sorted = [...this.#values].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
  }
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
