/*
 * Every KV block (by chained hash) any engine of a node has computed, so an engine can
 * tell a prompt block it computes for the first time from one it recomputes because
 * the node lost it (evicted from GPU and not in the host tier, or never reloaded):
 * the waste issue 13's host tier and branch-aware retention attack. Only counts; it
 * changes no scheduling.
 */
export class NodeKvLedger {
  private readonly computed = new Set<number>();

  record(hash: number): void {
    this.computed.add(hash);
  }

  has(hash: number): boolean {
    return this.computed.has(hash);
  }

  get size(): number {
    return this.computed.size;
  }
}
