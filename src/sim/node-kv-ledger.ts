/*
 * Every KV block (by chained hash) any engine of a node has computed, so an engine can
 * tell a prompt block it computes for the first time from one it recomputes because
 * the node lost it (evicted from GPU and not in the host tier, or never reloaded):
 * the waste issue 13's host tier and branch-aware retention attack. Only counts; it
 * changes no scheduling. A long-running engine bounds it: past `maxEntries` the
 * oldest record is forgotten (a Set iterates in insertion order), so a recompute of
 * something computed long ago may go uncounted.
 */
export class NodeKvLedger {
  private readonly computed = new Set<number>();

  constructor(private readonly maxEntries = Number.POSITIVE_INFINITY) {}

  record(hash: number): void {
    const computed = this.computed;
    if (computed.has(hash)) return;
    if (computed.size >= this.maxEntries) {
      const oldest = computed.values().next();
      if (oldest.done !== true) computed.delete(oldest.value);
    }
    computed.add(hash);
  }

  has(hash: number): boolean {
    return this.computed.has(hash);
  }

  get size(): number {
    return this.computed.size;
  }
}
