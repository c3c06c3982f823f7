/*
 * The simulator's future-event list: a binary min-heap ordered by (time, sequence).
 * The sequence number is the order of scheduling, so events at the same instant run
 * in the order they were scheduled and a run is deterministic.
 */

export interface Scheduled<E> {
  readonly time: number;
  readonly seq: number;
  readonly event: E;
}

export class EventQueue<E> {
  readonly #heap: Scheduled<E>[] = [];
  #nextSeq = 0;

  get size(): number {
    return this.#heap.length;
  }

  /** Schedules `event` at `time` (after every event already scheduled at that time). */
  push(time: number, event: E): void {
    if (Number.isNaN(time)) throw new RangeError("event time must be a number");
    const item: Scheduled<E> = { time, seq: this.#nextSeq++, event };
    const heap = this.#heap;
    let i = heap.length;
    heap.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent] as Scheduled<E>;
      if (!before(item, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = item;
  }

  peek(): Scheduled<E> | undefined {
    return this.#heap[0];
  }

  pop(): Scheduled<E> | undefined {
    const heap = this.#heap;
    const top = heap[0];
    if (top === undefined) return undefined;
    const last = heap.pop() as Scheduled<E>;
    const n = heap.length;
    if (n === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      let child = left;
      if (right < n && before(heap[right] as Scheduled<E>, heap[left] as Scheduled<E>)) child = right;
      const c = heap[child] as Scheduled<E>;
      if (!before(c, last)) break;
      heap[i] = c;
      i = child;
    }
    heap[i] = last;
    return top;
  }
}

function before<E>(a: Scheduled<E>, b: Scheduled<E>): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}
