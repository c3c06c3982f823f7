import { type EngineState, isAvailable, type SaturationSettings } from "../engines.js";
import { engineFreeTokens } from "./snapshot-builder.js";
import type { TaoEngine } from "./snapshot.js";

/*
 * The reservations TAO placement holds for ready-soon programs.
 *
 * A reservation is a placeholder in its engine's inFlight (one of the engine's slots:
 * the slot a returning program would otherwise wait for) plus its tokens in the KV
 * estimate, for at most a ttl. It ends one of three ways:
 *   used      the program's call arrived and took the held slot (applyPlan converts the
 *             placeholder into the call: inFlight does not change);
 *   released  the program's call went to another engine (or the program ended);
 *   expired   the ttl ran out first.
 *
 * Engines' free KV (engineViews): what the pool's KV account (core/admission.ts, the
 * one account routing's admission uses too) projects the engine's running calls to
 * hold, plus the reservations, against the same KV target; the scraped kvUsage counts
 * when it is higher (other clients, a lagging account).
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

/** How the pool's KV account sees one engine. */
export interface EngineKvView {
  /** KV capacity in tokens. */
  capacityTokens: number;
  /** Tokens the engine's running calls will hold (the account's projection). */
  committedTokens: number;
}

export class ReservationBook {
  readonly #held = new Map<string, Reservation>();
  readonly #onOutcome: ReservationListener;
  #freed = 0;

  constructor(onOutcome: ReservationListener = () => undefined) {
    this.#onOutcome = onOutcome;
  }

  /** A call left an engine: KV a held program may now fit in. */
  callEnded(): void {
    this.#freed += 1;
  }

  /** How many times committed KV was given back (a call ended, a reservation released or expired): grows only. */
  get freedCount(): number {
    return this.#freed;
  }

  /**
   * The engines as the planner sees them: free KV = kvTarget × capacity − used, where
   * used is the larger of the scraped share and (committed + reservations) / capacity.
   */
  engineViews(engines: readonly EngineState[], kvOf: (engineId: string) => EngineKvView, kvTarget: number, saturation: SaturationSettings): TaoEngine[] {
    return engines.map((engine) => {
      const { capacityTokens, committedTokens } = kvOf(engine.id);
      const used = capacityTokens > 0 ? Math.max(engine.kvUsage, (committedTokens + this.tokensOn(engine.id)) / capacityTokens) : 1;
      return { engineId: engine.id, freeTokens: engineFreeTokens({ ...engine, kvUsage: used }, capacityTokens, saturation, kvTarget) };
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

  /** When the first held reservation runs out; undefined when none is held. */
  earliestUntil(): number | undefined {
    let earliest: number | undefined;
    for (const reservation of this.#held.values()) earliest = earliest === undefined ? reservation.until : Math.min(earliest, reservation.until);
    return earliest;
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
