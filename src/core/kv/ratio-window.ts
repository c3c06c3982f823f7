/*
 * The last `capacity` observed ratios (a tool wait's actual duration ÷ its prediction)
 * and a quantile of them, pure. A ring buffer, so memory and the cost of a quantile stay
 * bounded however long the pool runs; the sorted copy is rebuilt only when a sample
 * arrived since the last read (O(capacity log capacity), capacity small).
 */
export class RatioWindow {
  readonly #samples: number[] = [];
  #next = 0;
  #sorted: number[] | undefined;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  get size(): number {
    return this.#samples.length;
  }

  /** A finite sample replaces the oldest once the window is full; anything else is ignored. */
  add(ratio: number): void {
    if (!Number.isFinite(ratio)) return;
    if (this.#samples.length < this.capacity) this.#samples.push(ratio);
    else this.#samples[this.#next] = ratio;
    this.#next = (this.#next + 1) % this.capacity;
    this.#sorted = undefined;
  }

  /** The q-quantile (nearest rank, q in [0, 1]); undefined while empty. */
  quantile(q: number): number | undefined {
    if (this.#samples.length === 0) return undefined;
    this.#sorted ??= [...this.#samples].sort((a, b) => a - b);
    const clamped = Math.min(1, Math.max(0, Number.isFinite(q) ? q : 1));
    const rank = Math.min(this.#sorted.length - 1, Math.max(0, Math.ceil(clamped * this.#sorted.length) - 1));
    return this.#sorted[rank];
  }
}
