import { type EngineState, isAvailable, type SaturationSettings } from "../../core/engines.js";

/*
 * Engine capacity held for programs that are ready soon (TAO "reserve" entries). A
 * reservation is a placeholder in its engine's inFlight (one of the engine's slots:
 * the slot a returning program would otherwise wait for) plus its tokens in the
 * pool's KV estimate, for at most `ttlMs`. It ends one of three ways:
 *   used      the program's call arrived and took the slot (applyPlan converts the
 *             placeholder into the call: inFlight does not change);
 *   released  the program's call went to another engine;
 *   expired   the ttl ran out first.
 */

export type ReservationOutcome = "held" | "used" | "released" | "expired";

interface Reservation {
  engineId: string;
  tokens: number;
  until: number;
}

export class Reservations {
  readonly #held = new Map<string, Reservation>();
  readonly #onOutcome: (outcome: ReservationOutcome) => void;

  constructor(onOutcome: (outcome: ReservationOutcome) => void = () => undefined) {
    this.#onOutcome = onOutcome;
  }

  /** Holds a slot of `engine` for the program; false when it cannot (already held, engine unavailable, ttl 0). */
  hold(programId: string, engine: EngineState, tokens: number, now: number, ttlMs: number, saturation: SaturationSettings): boolean {
    if (ttlMs <= 0 || this.#held.has(programId) || !isAvailable(engine, saturation)) return false;
    engine.inFlight += 1;
    this.#held.set(programId, { engineId: engine.id, tokens, until: now + ttlMs });
    this.#onOutcome("held");
    return true;
  }

  has(programId: string): boolean {
    return this.#held.has(programId);
  }

  /** programId → engineId, as applyPlan takes it. */
  heldMap(): Map<string, string> {
    return new Map([...this.#held].map(([programId, r]) => [programId, r.engineId]));
  }

  /** The program's call took the held slot: the placeholder is the call now. */
  used(programId: string): void {
    if (this.#held.delete(programId)) this.#onOutcome("used");
  }

  /** Frees the slot unused. */
  release(programId: string, engines: ReadonlyMap<string, EngineState>, outcome: "released" | "expired" = "released"): void {
    const reservation = this.#held.get(programId);
    if (reservation === undefined) return;
    this.#held.delete(programId);
    const engine = engines.get(reservation.engineId);
    if (engine !== undefined) engine.inFlight = Math.max(0, engine.inFlight - 1);
    this.#onOutcome(outcome);
  }

  /** Releases every reservation whose time is up; returns how many. */
  expire(now: number, engines: ReadonlyMap<string, EngineState>): number {
    let expired = 0;
    for (const [programId, reservation] of [...this.#held]) {
      if (reservation.until > now) continue;
      this.release(programId, engines, "expired");
      expired += 1;
    }
    return expired;
  }

  /** Tokens held on the engine, for the KV estimate. */
  tokensOn(engineId: string): number {
    let tokens = 0;
    for (const reservation of this.#held.values()) if (reservation.engineId === engineId) tokens += reservation.tokens;
    return tokens;
  }

  get size(): number {
    return this.#held.size;
  }
}
