import { type EngineState, isAvailable, type SaturationSettings } from "../engines.js";
import { engineFreeTokens } from "./snapshot-builder.js";
import type { TaoEngine } from "./snapshot.js";

/*
 * What TAO placement has committed on each engine: the KV of the calls it sent there
 * (until they end) and the reservations it holds for ready-soon programs.
 *
 * A reservation is a placeholder in its engine's inFlight (one of the engine's slots:
 * the slot a returning program would otherwise wait for) plus its tokens in the KV
 * estimate, for at most a ttl. It ends one of three ways:
 *   used      the program's call arrived and took the slot (applyPlan converts the
 *             placeholder into the call: inFlight does not change);
 *   released  the program's call went to another engine (or the program ended);
 *   expired   the ttl ran out first.
 *
 * Engines' free KV (engineViews): the scraped kvUsage lags dispatches and leaves out
 * requests still waiting in the engine, so the KV counted as used is the larger of the
 * scraped figure and what is committed here.
 *
 * Pure and deterministic: time is passed in; mutates only the engines' inFlight.
 */

export type ReservationOutcome = "held" | "used" | "released" | "expired";

export interface Reservation {
  engineId: string;
  tokens: number;
  until: number;
}

export type ReservationListener = (outcome: ReservationOutcome, programId: string, reservation: Reservation) => void;

export class ReservationBook {
  readonly #held = new Map<string, Reservation>();
  /** KV tokens of the calls running on each engine (their caller decides what a call counts). */
  readonly #calls = new Map<string, number>();
  readonly #onOutcome: ReservationListener;
  #freed = 0;

  constructor(onOutcome: ReservationListener = () => undefined) {
    this.#onOutcome = onOutcome;
  }

  /** A call went to the engine: its KV is committed there until callEnded. */
  callStarted(engineId: string, tokens: number): void {
    this.#calls.set(engineId, (this.#calls.get(engineId) ?? 0) + tokens);
  }

  callEnded(engineId: string, tokens: number): void {
    this.#freed += 1;
    this.#calls.set(engineId, Math.max(0, (this.#calls.get(engineId) ?? 0) - tokens));
  }

  /** How many times committed KV was given back (a call ended, a reservation released or expired): grows only. */
  get freedCount(): number {
    return this.#freed;
  }

  /** Committed call tokens per engine (reservations not included). */
  callTokens(): Record<string, number> {
    return Object.fromEntries(this.#calls);
  }

  /** Tokens committed on the engine: running calls and held reservations. */
  committedOn(engineId: string): number {
    return (this.#calls.get(engineId) ?? 0) + this.tokensOn(engineId);
  }

  /** The engines as the planner sees them: free KV with used = max(scraped, committed / capacity). */
  engineViews(engines: readonly EngineState[], capacityOf: (engineId: string) => number, saturation: SaturationSettings): TaoEngine[] {
    return engines.map((engine) => {
      const capacity = capacityOf(engine.id);
      const used = capacity > 0 ? Math.max(engine.kvUsage, this.committedOn(engine.id) / capacity) : 1;
      return { engineId: engine.id, freeTokens: engineFreeTokens({ ...engine, kvUsage: used }, capacity, saturation) };
    });
  }

  /** Holds a slot of `engine` for the program; false when it cannot (already held, engine unavailable, ttl 0). */
  hold(programId: string, engine: EngineState, tokens: number, now: number, ttlMs: number, saturation: SaturationSettings): boolean {
    if (ttlMs <= 0 || this.#held.has(programId) || !isAvailable(engine, saturation)) return false;
    engine.inFlight += 1;
    const reservation = { engineId: engine.id, tokens, until: now + ttlMs };
    this.#held.set(programId, reservation);
    this.#onOutcome("held", programId, reservation);
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
    const reservation = this.#held.get(programId);
    if (reservation === undefined) return;
    this.#held.delete(programId);
    this.#onOutcome("used", programId, reservation);
  }

  /** Frees the slot unused. */
  release(programId: string, engines: ReadonlyMap<string, EngineState>, outcome: "released" | "expired" = "released"): void {
    const reservation = this.#held.get(programId);
    if (reservation === undefined) return;
    this.#held.delete(programId);
    this.#freed += 1;
    const engine = engines.get(reservation.engineId);
    if (engine !== undefined) engine.inFlight = Math.max(0, engine.inFlight - 1);
    this.#onOutcome(outcome, programId, reservation);
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

  /** Tokens held on the engine by reservations. */
  tokensOn(engineId: string): number {
    let tokens = 0;
    for (const reservation of this.#held.values()) if (reservation.engineId === engineId) tokens += reservation.tokens;
    return tokens;
  }

  get size(): number {
    return this.#held.size;
  }
}
