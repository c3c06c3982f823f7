import { type Dispatch, type DispatchSettings, pickAdmittedEngine, takeDispatches } from "../dispatch.js";
import { type EngineState, isAvailable } from "../engines.js";
import type { Dequeued, ProgramQueue } from "../queue.js";
import type { Admission } from "../admission.js";
import { applyPlan, queuedByProgram } from "./apply-plan.js";
import { type StaleReason, validatePlan } from "./plan-validation.js";
import type { TaoPlan, TaoPlanEntry } from "./planner.js";
import { type ReservationBook } from "./reservation-book.js";
import type { TaoSnapshot } from "./snapshot.js";

/*
 * TAO's dispatch rule, shared by the pool and the simulator: given the plan in force,
 * which queued calls go where now.
 *
 * WHICH calls go first is still the program queue's order (PLAS/ATLAS levels, tenant
 * fairness, anti-starvation promotion); TAO decides WHERE they run. The pump walks the
 * queued programs in that order (queuedByProgram), and each program's calls go
 *   - to its plan entry's engine, when the plan has a valid entry for it (consecutive
 *     such programs are applied together by applyPlan, which keeps their order and
 *     checks each engine's slots and saturation); a call whose engine has no free slot
 *     stays queued while the plan lives, and the programs after it go on;
 *   - nowhere yet, when the plan saw the program queued and left it out: the planner
 *     admits every program that fits, so a left-out program found no KV room, and
 *     sending it anyway is what overfills an engine's KV (preemption, recompute, the
 *     cache of everything running there lost). It is held (admission control) and
 *     the programs after it go on; the next plan, made once a call ends and frees
 *     KV, may place it;
 *   - by the core's routing rule (pickEngine), when such a left-out program is
 *     overdue, among the engines the pool's admission account admits it to (with an
 *     account; charged as it goes): it then waits for room call by call, as routing's
 *     admission makes every call do, instead of being sent onto a full engine (which
 *     preempted: 84 and 342 preemptions on the coding agent at 0.3 and 3 programs/s,
 *     0 through the account). Overdue: one of its calls is promoted by the queue's anti-starvation rule, or
 *     it has waited holdLeftOutMs since its first queued call. The planner maximises
 *     cache credit first, so a context whose credit has decayed (new, or back from a
 *     long tool) can be left out plan after plan while programs with credit fill
 *     every gap; it must not wait for ever. (Placing overdue programs first in the
 *     plan and draining an engine for one that fits nowhere was measured too: same
 *     job latency and tails in the simulator, more machinery.) holdLeftOutMs 0 routes
 *     every left-out program at once (by routing's admission alone);
 *   - nowhere yet, when its calls arrived after the plan was made, or its entry went
 *     stale: they wait for the next plan (needsPlan), and so do all programs after
 *     them in the queue's order (a call the plan never saw must not be overtaken by
 *     those it saw).
 * One exception to the queue's order: a program whose reservation is held takes its
 * slot first (the capacity was set aside for it). Valid reserve entries whose program
 * has no call yet hold their engine's slot in the ReservationBook.
 *
 * A plan is re-validated at every pump against the live state (the caller's snapshot),
 * for the entries not yet used up; stale ones are reported and not retried. Without a
 * plan (none yet, expired) nothing is placed and needsPlan says so; after a planning
 * failure every call is routed until a plan is installed again.
 *
 * Pure and deterministic: time is passed in; mutates the queue, engines' inFlight and
 * the reservation book.
 */

export interface TaoPumpSettings {
  /** Routing and saturation of the fallback path. */
  dispatch: DispatchSettings;
  /** Longest a reservation is held (ms); 0 holds none. */
  reservationTtlMs: number;
  /**
   * How long a program the plan left out (no KV room) is held, counted from its first
   * queued call, before it is routed anyway (ms). 0 routes left-out programs at once
   * (by routing's admission alone); Infinity holds them until the queue's anti-starvation rule
   * promotes one of their calls.
   */
  holdLeftOutMs: number;
  /**
   * The pool's admission account: calls the pump routes itself (overdue left-out
   * programs, every call after a failed plan) go only to engines that admit them, and
   * are charged to it as they go, as routing's admission does. Absent: the saturation
   * rule alone decides.
   */
  admission?: Admission | undefined;
}

export interface TaoPumpHooks {
  onStale?(reason: StaleReason, entry: TaoPlanEntry): void;
  /** A valid entry whose engine could not take (all) its calls now. */
  onBlocked?(entry: TaoPlanEntry): void;
}

export interface TaoPumpResult {
  dispatches: Dispatch[];
  /**
   * Plan again: calls are waiting that no plan covers (new, or their entry went
   * stale), or programs are held and KV was freed since the plan was made.
   */
  needsPlan: boolean;
  /** Left-out programs held in the queue by this pump. */
  held: number;
  /** Earliest instant at which a held program is routed anyway: pump then (undefined: none to come). */
  holdUntil: number | undefined;
}

/** The live state the pending entries are re-validated against. */
export type LiveSnapshot = (byProgram: ReadonlyMap<string, Dequeued[]>, pending: readonly TaoPlanEntry[]) => TaoSnapshot;

/**
 * The programs whose readiness a re-validation asks for: the pending reserve entries'
 * programs that have no call queued. Asking uses a program's readiness probe
 * (readiness.ts), and a program the plan did not reserve for must keep its probe for
 * the next plan.
 */
export function reservingPrograms(byProgram: ReadonlyMap<string, unknown>, pending: readonly TaoPlanEntry[]): Set<string> {
  return new Set(pending.filter((e) => e.kind === "reserve" && !byProgram.has(e.programId)).map((e) => e.programId));
}

export class TaoPump {
  readonly #settings: TaoPumpSettings;
  readonly #book: ReservationBook;
  readonly #hooks: TaoPumpHooks;
  #plan: TaoPlan | undefined;
  /** Programs the plan's snapshot had queued: those without an entry were left out on purpose. */
  #planQueued = new Set<string>();
  /** Programs of the plan whose entry is used up (calls sent, or reserved) or went stale: not re-validated. */
  #handled = new Set<string>();
  #failed = false;
  /** book.freedCount when the plan was installed: more since means KV a held program may fit in. */
  #freedAtPlan = 0;

  constructor(settings: TaoPumpSettings, book: ReservationBook, hooks: TaoPumpHooks = {}) {
    if (Number.isNaN(settings.holdLeftOutMs) || settings.holdLeftOutMs < 0) {
      throw new RangeError(`holdLeftOutMs must be >= 0 (Infinity: until promoted), got ${settings.holdLeftOutMs}`);
    }
    this.#settings = settings;
    this.#book = book;
    this.#hooks = hooks;
  }

  get plan(): TaoPlan | undefined {
    return this.#plan;
  }

  get failed(): boolean {
    return this.#failed;
  }

  /** The plan in force from now on, made from `snapshot`. */
  install(plan: TaoPlan, snapshot: TaoSnapshot): void {
    this.#drop();
    this.#failed = false;
    this.#plan = plan;
    this.#freedAtPlan = this.#book.freedCount;
    for (const program of snapshot.programs) if (program.queued) this.#planQueued.add(program.programId);
  }

  /** No plan (nothing to place); planning works. */
  clear(): void {
    this.#drop();
    this.#failed = false;
  }

  /** Planning failed: route every call until a plan is installed. */
  fail(): void {
    this.#drop();
    this.#failed = true;
  }

  /** Releases reservations whose ttl ran out. */
  expire(now: number, engines: readonly EngineState[]): void {
    if (this.#book.size === 0) return;
    this.#book.expire(now, new Map(engines.map((engine) => [engine.id, engine])));
  }

  pump(queue: ProgramQueue, engines: EngineState[], now: number, live: LiveSnapshot): TaoPumpResult {
    const { dispatch } = this.#settings;
    this.expire(now, engines);
    const dispatches = this.claimReservations(queue, engines, now);
    if (this.#failed) {
      dispatches.push(...takeDispatches(queue, engines, now, dispatch, { admission: this.#settings.admission }).dispatches);
      return { dispatches, needsPlan: queue.size > 0, held: 0, holdUntil: undefined };
    }
    const plan = this.#plan;
    if (plan === undefined || now > plan.validUntil) {
      if (plan !== undefined) this.#drop();
      return { dispatches, needsPlan: queue.size > 0, held: 0, holdUntil: undefined };
    }
    if (!engines.some((engine) => isAvailable(engine, dispatch.saturation))) return { dispatches, needsPlan: false, held: 0, holdUntil: undefined };

    const byProgram = queuedByProgram(queue, now);
    const pending = plan.entries.filter((entry) => !this.#handled.has(entry.programId));
    let needsPlan = false;
    const valid = new Map<string, TaoPlanEntry>();
    if (pending.length > 0) {
      const validation = validatePlan({ ...plan, entries: pending }, live(byProgram, pending));
      for (const { entry, reason } of validation.skipped) {
        this.#hooks.onStale?.(reason, entry);
        this.#handled.add(entry.programId);
        needsPlan = true;
      }
      for (const entry of validation.apply) valid.set(entry.programId, entry);
    }

    const held = this.#book.heldMap();
    let segment: TaoPlanEntry[] = [];
    const flush = () => {
      if (segment.length === 0) return;
      const application = applyPlan(queue, engines, now, segment, dispatch.saturation, held);
      for (const programId of application.converted) this.#book.used(programId);
      dispatches.push(...application.dispatches);
      // An entry is used up once its calls are out; a blocked one keeps trying while the plan lives.
      const blocked = new Set(application.blocked.map((entry) => entry.programId));
      for (const entry of application.blocked) this.#hooks.onBlocked?.(entry);
      for (const entry of segment) if (!blocked.has(entry.programId)) this.#handled.add(entry.programId);
      segment = [];
    };
    let heldCount = 0;
    let holdUntil: number | undefined;
    walk: for (const [programId, calls] of byProgram) {
      const entry = valid.get(programId);
      if (entry !== undefined) {
        segment.push(entry);
        continue;
      }
      if (this.#handled.has(programId) || !this.#planQueued.has(programId)) {
        needsPlan = true;
        break walk;
      }
      flush();
      const until = this.#heldUntil(calls);
      if (now < until) {
        heldCount += 1;
        if (Number.isFinite(until)) holdUntil = Math.min(holdUntil ?? until, until);
        continue;
      }
      if (!this.#route(queue, engines, now, calls, dispatches)) break walk;
      // All its calls are out: a later call of it waits for the next plan like any new one.
      this.#planQueued.delete(programId);
    }
    flush();

    for (const entry of valid.values()) {
      if (byProgram.has(entry.programId)) continue;
      // A reserve entry whose program has no call yet: hold its engine's capacity.
      const engine = engines.find((e) => e.id === entry.engineId);
      this.#handled.add(entry.programId);
      if (engine === undefined) continue;
      if (!this.#book.hold(entry.programId, engine, entry.tokens, now, this.#settings.reservationTtlMs, dispatch.saturation) && this.#settings.reservationTtlMs > 0 && !this.#book.has(entry.programId)) {
        this.#hooks.onBlocked?.(entry);
      }
    }
    // A program that held a slot elsewhere does not need it any more.
    const byId = new Map(engines.map((engine) => [engine.id, engine]));
    for (const d of dispatches) if (this.#book.has(d.call.programId)) this.#book.release(d.call.programId, byId);
    if (heldCount > 0 && this.#book.freedCount !== this.#freedAtPlan) needsPlan = true;
    return { dispatches, needsPlan, held: heldCount, holdUntil };
  }

  /** Until when a left-out program is held: -Infinity when it is overdue (route it now). */
  #heldUntil(calls: readonly Dequeued[]): number {
    const { holdLeftOutMs } = this.#settings;
    if (holdLeftOutMs === 0 || calls.some((queued) => queued.promoted)) return Number.NEGATIVE_INFINITY;
    let first = Number.POSITIVE_INFINITY;
    for (const queued of calls) first = Math.min(first, queued.call.enqueuedAt);
    return first + holdLeftOutMs;
  }

  /** Routes a left-out program's calls one by one; false once no engine can take any call. */
  #route(queue: ProgramQueue, engines: EngineState[], now: number, calls: readonly Dequeued[], out: Dispatch[]): boolean {
    const { dispatch, admission } = this.#settings;
    for (const queued of calls) {
      // Through the admission account when there is one: an overdue program still waits for room, it no longer overfills an engine.
      const choice = pickAdmittedEngine(queued.call, engines, dispatch, admission);
      if (choice === undefined) return false;
      const call = queue.remove(queued.call.callId);
      if (call === undefined) continue;
      choice.engine.inFlight += 1;
      admission?.sent(choice.engine.id, call);
      out.push({ call, engineId: choice.engine.id, level: queued.level, promoted: queued.promoted, reason: choice.reason });
    }
    return true;
  }

  /**
   * Programs holding a reservation whose call has arrived go to the reserved engine
   * first (pump does this itself; a caller that plans between its pumps claims before
   * planning, so that a claimed call is not in the plan's snapshot).
   */
  claimReservations(queue: ProgramQueue, engines: EngineState[], now: number): Dispatch[] {
    if (this.#book.size === 0 || queue.size === 0) return [];
    const held = this.#book.heldMap();
    // applyPlan passes over the programs that have no call yet (it lists them as reserves).
    const entries: TaoPlanEntry[] = [...held].map(([programId, engineId]) => ({ programId, engineId, kind: "reserve", tokens: 0, units: 0, credit: 0, ready: true }));
    const application = applyPlan(queue, engines, now, entries, this.#settings.dispatch.saturation, held);
    for (const programId of application.converted) this.#book.used(programId);
    return application.dispatches;
  }

  #drop(): void {
    this.#plan = undefined;
    this.#planQueued = new Set();
    this.#handled = new Set();
  }
}
