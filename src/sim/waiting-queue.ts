/*
 * The engine's waiting queue: a binary min-heap. Removal of an aborted entry is lazy
 * (the caller's `isLive` says which entries still count), because aborts are rare
 * and a heap has no cheap arbitrary delete.
 */

export class WaitingQueue<T> {
  private readonly heap: T[] = [];

  constructor(
    private readonly before: (a: T, b: T) => boolean,
    private readonly isLive: (item: T) => boolean,
  ) {}

  push(item: T): void {
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent] as T;
      if (!this.before(item, p)) break;
      heap[i] = p;
      i = parent;
    }
    heap[i] = item;
  }

  /** The first live entry, dropping dead ones on the way. */
  peek(): T | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0] as T;
      if (this.isLive(top)) return top;
      this.removeTop();
    }
    return undefined;
  }

  pop(): T | undefined {
    const top = this.peek();
    if (top !== undefined) this.removeTop();
    return top;
  }

  /** Entries held, dead ones included. */
  get size(): number {
    return this.heap.length;
  }

  private removeTop(): void {
    const heap = this.heap;
    const last = heap.pop() as T;
    if (heap.length === 0) return;
    let i = 0;
    const n = heap.length;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      let child = left;
      if (right < n && this.before(heap[right] as T, heap[left] as T)) child = right;
      const c = heap[child] as T;
      if (!this.before(c, last)) break;
      heap[i] = c;
      i = child;
    }
    heap[i] = last;
  }
}
