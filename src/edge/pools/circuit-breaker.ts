/*
 * A per-pool circuit breaker (pure: the clock is passed in). Closed: calls go. After
 * `failuresToOpen` failures in a row it opens: the pool is skipped for `openMs`.
 * Then half-open: one call may try it (the probe); its success closes the breaker,
 * its failure opens it again for another `openMs`. A probe that never reports (its
 * isolate went away) is given up on after `openMs`, so the pool is not skipped forever.
 *
 * State lives in the isolate's memory: each isolate learns a dead pool from its own
 * failures (three calls at most), and the pools' status readings tell every isolate.
 */

export interface CircuitBreakerSettings {
  failuresToOpen: number;
  openMs: number;
}

export const DEFAULT_CIRCUIT_BREAKER: CircuitBreakerSettings = Object.freeze({ failuresToOpen: 3, openMs: 10_000 });

export type BreakerState = "closed" | "open" | "half-open";

export class CircuitBreaker {
  #failures = 0;
  #openedAt: number | undefined;
  #probeSince: number | undefined;

  constructor(readonly settings: CircuitBreakerSettings = DEFAULT_CIRCUIT_BREAKER) {
    if (!(Number.isInteger(settings.failuresToOpen) && settings.failuresToOpen >= 1)) {
      throw new RangeError(`failuresToOpen must be an integer >= 1, got ${settings.failuresToOpen}`);
    }
    if (!(Number.isFinite(settings.openMs) && settings.openMs > 0)) throw new RangeError(`openMs must be > 0, got ${settings.openMs}`);
  }

  state(now: number): BreakerState {
    if (this.#openedAt === undefined) return "closed";
    return now - this.#openedAt < this.settings.openMs ? "open" : "half-open";
  }

  /**
   * Whether `allow` would let a call through now, without claiming the half-open
   * probe: for ranking pools, before one is tried.
   */
  available(now: number): boolean {
    const state = this.state(now);
    if (state === "closed") return true;
    if (state === "open") return false;
    return this.#probeSince === undefined || now - this.#probeSince >= this.settings.openMs;
  }

  /**
   * Whether a call may go to the pool now. In half-open, only one call (the probe)
   * is let through until it reports or `openMs` passes.
   */
  allow(now: number): boolean {
    const state = this.state(now);
    if (state === "closed") return true;
    if (state === "open") return false;
    if (this.#probeSince !== undefined && now - this.#probeSince < this.settings.openMs) return false;
    this.#probeSince = now;
    return true;
  }

  succeeded(): void {
    this.#failures = 0;
    this.#openedAt = undefined;
    this.#probeSince = undefined;
  }

  failed(now: number): void {
    this.#probeSince = undefined;
    if (this.#openedAt !== undefined) {
      // A failed probe (or a late failure while open): open for another period.
      this.#openedAt = now;
      return;
    }
    this.#failures += 1;
    if (this.#failures >= this.settings.failuresToOpen) this.#openedAt = now;
  }
}
