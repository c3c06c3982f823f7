/*
 * Runs many paced jobs off one timer: every job due in the same tick (1 ms by default)
 * fires from a single timer callback, so 2,000 streams at 50 tokens/s cost ~1,000
 * timer wakeups a second, not 100,000. Due times are absolute: a tick that fires late
 * runs what it owes then, and the next due time stays on the original schedule, so a
 * source that falls behind catches up instead of lowering its rate.
 */

export class TickScheduler<Job> {
  /** Jobs by tick number (due time / tickMs, rounded up). */
  readonly #buckets = new Map<number, Job[]>();
  /** Tick numbers with jobs, ascending (a few dozen at most: one interval ahead). */
  readonly #ticks: number[] = [];
  #timer: NodeJS.Timeout | undefined;
  #armedTick: number | undefined;
  #stopped = false;
  /** Timer callbacks run so far (each fires every job due by then). */
  wakeups = 0;

  constructor(
    /** Runs a job at (or after) its due time; it may schedule itself again. */
    private readonly fire: (job: Job) => void,
    private readonly now: () => number = () => performance.now(),
    private readonly tickMs = 1,
  ) {}

  /** Runs `job` at `dueMs` (on the `now` clock). */
  schedule(job: Job, dueMs: number): void {
    if (this.#stopped) return;
    const tick = Math.ceil(dueMs / this.tickMs);
    const bucket = this.#buckets.get(tick);
    if (bucket) {
      bucket.push(job);
      return;
    }
    this.#buckets.set(tick, [job]);
    insertSorted(this.#ticks, tick);
    if (this.#armedTick === undefined || tick < this.#armedTick) this.#arm();
  }

  /** Drops every pending job and the timer. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#buckets.clear();
    this.#ticks.length = 0;
  }

  #arm(): void {
    if (this.#timer) clearTimeout(this.#timer);
    const next = this.#ticks[0];
    this.#armedTick = next;
    if (next === undefined) {
      this.#timer = undefined;
      return;
    }
    this.#timer = setTimeout(() => this.#run(), Math.max(0, next * this.tickMs - this.now()));
  }

  #run(): void {
    this.#timer = undefined;
    this.#armedTick = undefined;
    this.wakeups++;
    const nowTick = Math.floor(this.now() / this.tickMs);
    while (!this.#stopped && this.#ticks.length > 0 && (this.#ticks[0] ?? Infinity) <= nowTick) {
      const tick = this.#ticks.shift() as number;
      const bucket = this.#buckets.get(tick) ?? [];
      this.#buckets.delete(tick);
      for (const job of bucket) this.fire(job);
    }
    if (!this.#stopped) this.#arm();
  }
}

function insertSorted(values: number[], value: number): void {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((values[mid] ?? 0) < value) low = mid + 1;
    else high = mid;
  }
  values.splice(low, 0, value);
}
