/*
 * Call IDs seen within the replay window. A signed call is accepted while its
 * timestamp is within ±timestampWindow of now, so remembering each ID for at least
 * 2 × timestampWindow after it was first seen covers every moment a replay could
 * still pass the timestamp check (the config enforces that bound). Entries expire
 * in insertion order, so a Map (ordered) purges from its front.
 */

export type ReplayCheck = "fresh" | "replayed" | "full";

export class ReplayGuard {
  readonly #expiresAt = new Map<string, number>();

  constructor(
    private readonly windowMs: number,
    private readonly capacity: number,
  ) {}

  /** Records the ID if it is new. "full": too many live IDs; the caller must refuse the call. */
  check(callId: string, now: number): ReplayCheck {
    this.#purge(now);
    const expiresAt = this.#expiresAt.get(callId);
    if (expiresAt !== undefined && expiresAt > now) return "replayed";
    // Refusing, not evicting: dropping a live ID would let its replay through.
    if (this.#expiresAt.size >= this.capacity) return "full";
    this.#expiresAt.set(callId, now + this.windowMs);
    return "fresh";
  }

  get size(): number {
    return this.#expiresAt.size;
  }

  #purge(now: number): void {
    for (const [callId, expiresAt] of this.#expiresAt) {
      if (expiresAt > now) break;
      this.#expiresAt.delete(callId);
    }
  }
}
