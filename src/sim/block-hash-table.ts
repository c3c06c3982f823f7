/*
 * Prefix-cache index: block hash → block id. Open addressing with linear probing
 * over typed arrays, because a Map keyed by 53-bit (heap-number) hashes was the
 * hottest spot of a simulated hour: every full block is registered and later
 * evicted. Never holds more entries than there are blocks, so a table of twice
 * that size stays at most half full.
 */

const EMPTY = -1;

export class BlockHashTable {
  private readonly keys: Float64Array;
  private readonly values: Int32Array;
  private readonly mask: number;
  private count = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 2) capacity *= 2;
    this.keys = new Float64Array(capacity);
    this.values = new Int32Array(capacity).fill(EMPTY);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  private slotOf(hash: number): number {
    return (hash >>> 0) & this.mask;
  }

  get(hash: number): number | undefined {
    const { keys, values, mask } = this;
    for (let i = this.slotOf(hash); ; i = (i + 1) & mask) {
      const v = values[i] as number;
      if (v === EMPTY) return undefined;
      if (keys[i] === hash) return v;
    }
  }

  has(hash: number): boolean {
    return this.get(hash) !== undefined;
  }

  /** Inserts or overwrites. */
  set(hash: number, block: number): void {
    const { keys, values, mask } = this;
    for (let i = this.slotOf(hash); ; i = (i + 1) & mask) {
      const v = values[i] as number;
      if (v === EMPTY) {
        if (this.count >= (mask + 1) >> 1) throw new Error("block hash table over capacity");
        keys[i] = hash;
        values[i] = block;
        this.count++;
        return;
      }
      if (keys[i] === hash) {
        values[i] = block;
        return;
      }
    }
  }

  /** Removes `hash` if it maps to `block`. */
  deleteIfMapsTo(hash: number, block: number): void {
    const { keys, values, mask } = this;
    let i = this.slotOf(hash);
    for (; ; i = (i + 1) & mask) {
      const v = values[i] as number;
      if (v === EMPTY) return;
      if (keys[i] === hash) {
        if (v !== block) return;
        break;
      }
    }
    // Backward-shift deletion keeps every probe chain unbroken without tombstones.
    let hole = i;
    for (let j = (hole + 1) & mask; values[j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.slotOf(keys[j] as number);
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const homeInRange = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (!homeInRange) {
        keys[hole] = keys[j] as number;
        values[hole] = values[j] as number;
        hole = j;
      }
    }
    values[hole] = EMPTY;
    this.count--;
  }
}
