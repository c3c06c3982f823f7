/*
 * A Map that lets go of a value as soon as its entry is deleted: for a long-lived
 * registry whose values come and go with each call (a call's state while the pool
 * holds it).
 *
 * Why not a Map: V8 keeps a Map's entries in a hash table that it replaces as the Map
 * grows, shrinks or fills with deleted entries (every few calls for a registry of calls
 * in flight), and the replaced table keeps the entries it had. A long-lived Map is in
 * the old generation and so are its replaced tables: garbage that only a full
 * (mark-compact) collection finds, while every young-generation collection treats what
 * they point at as live. So the state of every call that was in flight at some
 * replacement stayed alive until the next full collection: copied at one scavenge,
 * promoted at the next, filling the old generation. In the pool at 16 connections
 * ~8 MB survived each scavenge, 0.3–0.5 MB with this (README, issue 14's ninth pass);
 * test/core/releasing-map.test.ts shows the mechanism.
 *
 * Here the Map holds a box per entry and deleting the entry empties the box, so a
 * replaced table keeps only empty boxes and keys.
 */

class Box<V> {
  value: V | undefined;

  constructor(value: V) {
    this.value = value;
  }
}

export class ReleasingMap<K, V> {
  readonly #boxes = new Map<K, Box<V>>();

  get size(): number {
    return this.#boxes.size;
  }

  has(key: K): boolean {
    return this.#boxes.has(key);
  }

  get(key: K): V | undefined {
    return this.#boxes.get(key)?.value;
  }

  set(key: K, value: V): this {
    const box = this.#boxes.get(key);
    if (box === undefined) this.#boxes.set(key, new Box(value));
    else box.value = value;
    return this;
  }

  delete(key: K): boolean {
    const box = this.#boxes.get(key);
    if (box === undefined) return false;
    box.value = undefined;
    return this.#boxes.delete(key);
  }

  /** The values in insertion order (a live view, like a Map's). */
  *values(): IterableIterator<V> {
    for (const box of this.#boxes.values()) yield box.value as V;
  }

  /** The entries in insertion order (a live view, like a Map's). */
  *entries(): IterableIterator<[K, V]> {
    for (const [key, box] of this.#boxes) yield [key, box.value as V];
  }

  [Symbol.iterator](): IterableIterator<[K, V]> {
    return this.entries();
  }
}
