/*
 * Binary min-heap whose items remember their own position, so an arbitrary item can
 * be removed in O(log n) (a queued call whose client disconnected, a call promoted
 * out of its level). An item may sit in several heaps at once through separate
 * position slots.
 */

export interface HeapSlot<T> {
  get(item: T): number;
  /** -1 means "not in this heap". */
  set(item: T, index: number): void;
}

export class IndexedHeap<T> {
  readonly #items: T[] = [];

  constructor(
    private readonly before: (a: T, b: T) => boolean,
    private readonly slot: HeapSlot<T>,
  ) {}

  get size(): number {
    return this.#items.length;
  }

  peek(): T | undefined {
    return this.#items[0];
  }

  /** The items in heap (not sorted) order; do not mutate. */
  items(): readonly T[] {
    return this.#items;
  }

  has(item: T): boolean {
    const index = this.slot.get(item);
    return index >= 0 && this.#items[index] === item;
  }

  push(item: T): void {
    this.#items.push(item);
    this.slot.set(item, this.#items.length - 1);
    this.#up(this.#items.length - 1);
  }

  pop(): T | undefined {
    const top = this.#items[0];
    if (top !== undefined) this.remove(top);
    return top;
  }

  remove(item: T): boolean {
    if (!this.has(item)) return false;
    const index = this.slot.get(item);
    const last = this.#items.pop() as T;
    this.slot.set(item, -1);
    if (index < this.#items.length) {
      this.#items[index] = last;
      this.slot.set(last, index);
      this.#down(index);
      this.#up(this.slot.get(last));
    }
    return true;
  }

  #at(index: number): T {
    return this.#items[index] as T;
  }

  #swap(i: number, j: number): void {
    const a = this.#at(i);
    const b = this.#at(j);
    this.#items[i] = b;
    this.#items[j] = a;
    this.slot.set(b, i);
    this.slot.set(a, j);
  }

  #up(index: number): void {
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(this.#at(i), this.#at(parent))) return;
      this.#swap(i, parent);
      i = parent;
    }
  }

  #down(index: number): void {
    const n = this.#items.length;
    let i = index;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let best = i;
      if (left < n && this.before(this.#at(left), this.#at(best))) best = left;
      if (right < n && this.before(this.#at(right), this.#at(best))) best = right;
      if (best === i) return;
      this.#swap(i, best);
      i = best;
    }
  }
}
