import type { Admission } from "../admission.js";
import type { Dispatch, DispatchSettings } from "../dispatch.js";
import type { EngineState } from "../engines.js";
import type { Dequeued, ProgramQueue, QueuedCall } from "../queue.js";
import type { StaleReason } from "./plan-validation.js";
import { createPlannerStats, planPlacement, type PlannerStats, type TaoPlan, type TaoPlanEntry } from "./planner.js";
import { type EngineKvView, type Reservation, ReservationBook, type ReservationOutcome } from "./reservation-book.js";
import { type TaoPlacementSettings, validateTaoPlacementSettings } from "./settings.js";
import { buildSnapshot } from "./snapshot-builder.js";
import type { TaoSnapshot } from "./snapshot.js";
import { reservingPrograms, TaoPump } from "./tao-pump.js";
import type { ToolSignals } from "./tool-signals.js";

/*
 * TAO placement, as the pool core runs it on either clock: the planner places the
 * waiting programs jointly under each engine's free KV (what the pool's one KV account
 * projects, plus reservations, against the admission KV target), TaoPump applies the
 * plan in the queue's priority order, and a program the plan left out for want of KV
 * is held (the same admission decision routing's KV rule makes call by call) until a
 * plan places it or it is overdue.
 *
 * A round (round()) expires reservations, lets a program whose reserved slot its call
 * has reached take it, plans when the caller asks (the pool: off the request path on
 * its plan loop; the simulator: at most once per interval of virtual time), and pumps.
 * Claiming before planning keeps a claimed call out of the plan's snapshot.
 *
 * If planning throws (a bug, not a state), every call is routed until a plan succeeds.
 * Pure and deterministic but for the optional stopwatch, which only times plans.
 */

export interface TaoPlacementHooks {
  onPlan?(plan: TaoPlan, wallMs: number, snapshotPrograms: number): void;
  onPlanError?(error: unknown): void;
  onStale?(reason: StaleReason): void;
  onBlocked?(entry: TaoPlanEntry): void;
  onReservation?(outcome: ReservationOutcome, programId: string, reservation: Reservation): void;
}

export interface TaoPlacementOptions {
  settings: TaoPlacementSettings;
  /** Routing of overdue left-out programs, and saturation. */
  dispatch: DispatchSettings;
  signals: ToolSignals;
  /** The pool's KV account per engine, and the share of capacity it admits up to. */
  kv: { view(engineId: string): EngineKvView; readonly kvTarget: number };
  hooks?: TaoPlacementHooks;
  /** Admission's account, through which the calls TAO routes itself go (TaoPumpSettings.admission). */
  admission?: Admission | undefined;
  /** Wall clock for plan timings only (e.g. performance.now); absent: 0. */
  stopwatch?: () => number;
}

export interface TaoRound {
  dispatches: Dispatch[];
  /** Calls wait that no plan covers, or KV was freed while programs are held: plan soon. */
  needsPlan: boolean;
  /** Left-out programs held in the queue by this round. */
  held: number;
  /** Earliest instant at which time alone changes something: a held program turns overdue, a reservation runs out. */
  wakeAt: number | undefined;
}

export interface TaoPlacementStats {
  plans: number;
  planErrors: number;
  planner: PlannerStats;
  /** Programs per planned snapshot (queued ones and reservation candidates). */
  snapshotPrograms: { mean: number; max: number };
  /** Plan entries whose program got at least one call out by it, or its reservation. */
  appliedEntries: number;
  skipped: Record<StaleReason, number>;
  /** Valid entries whose engine had no free slot (or went unhealthy) when applied. */
  blocked: number;
  /** Calls by how they went out: the plan's engine, a held reservation, or routing (left-out programs once overdue, or after a failed plan). */
  dispatches: { planned: number; reserved: number; routed: number };
  /** Most left-out programs one round held. */
  heldMax: number;
  reservations: { made: number; used: number; expired: number; released: number };
  /** The plan in force, if any. */
  plan: { at: number; validUntil: number; method: TaoPlan["method"]; entries: number; reserves: number } | undefined;
  reservationsHeld: number;
}

function zeroSkips(): Record<StaleReason, number> {
  return { "plan-expired": 0, "program-gone": 0, "engine-gone": 0, "call-gone": 0, "not-ready": 0, "program-grew": 0, capacity: 0 };
}

export class TaoPlacement {
  readonly #options: TaoPlacementOptions;
  readonly #book: ReservationBook;
  readonly #pump: TaoPump;
  readonly #counts: Omit<TaoPlacementStats, "snapshotPrograms" | "plan" | "reservationsHeld" | "planner"> & { planner: PlannerStats };
  #snapshotProgramsSum = 0;
  #snapshotProgramsMax = 0;
  /** Programs of the plan in force that got a call out by it, or its reservation. */
  #applied = new Set<string>();

  constructor(options: TaoPlacementOptions) {
    validateTaoPlacementSettings(options.settings);
    this.#options = options;
    const hooks = options.hooks;
    this.#counts = {
      plans: 0,
      planErrors: 0,
      planner: createPlannerStats(),
      appliedEntries: 0,
      skipped: zeroSkips(),
      blocked: 0,
      dispatches: { planned: 0, reserved: 0, routed: 0 },
      heldMax: 0,
      reservations: { made: 0, used: 0, expired: 0, released: 0 },
    };
    this.#book = new ReservationBook((outcome, programId, reservation) => {
      if (outcome === "held") {
        this.#counts.reservations.made += 1;
        this.#countApplied(programId);
      } else {
        this.#counts.reservations[outcome] += 1;
      }
      hooks?.onReservation?.(outcome, programId, reservation);
    });
    const { reservationTtlMs, holdLeftOutMs } = options.settings;
    this.#pump = new TaoPump({ dispatch: options.dispatch, reservationTtlMs, holdLeftOutMs, admission: options.admission }, this.#book, {
      onStale: (reason) => {
        this.#counts.skipped[reason] += 1;
        hooks?.onStale?.(reason);
      },
      onBlocked: (entry) => {
        this.#counts.blocked += 1;
        hooks?.onBlocked?.(entry);
      },
    });
  }

  /** No plan in force (none yet, or it expired): a round should plan. */
  needsPlan(now: number): boolean {
    const plan = this.#pump.plan;
    return plan === undefined || now > plan.validUntil;
  }

  /** One round: expire, claim held slots, plan when asked, pump. */
  round(queue: ProgramQueue, engines: EngineState[], now: number, plan: boolean): TaoRound {
    this.#pump.expire(now, engines);
    const claimed = this.#pump.claimReservations(queue, engines, now);
    if (plan) this.#plan(queue, engines, now);
    const pumped = this.#pump.pump(queue, engines, now, (byProgram, pending) => this.#liveSnapshot(byProgram, pending, engines, now));
    this.#counts.heldMax = Math.max(this.#counts.heldMax, pumped.held);
    const dispatches = [...claimed, ...pumped.dispatches];
    for (const dispatch of dispatches) {
      if (dispatch.reason === "tao-reserved") this.#counts.dispatches.reserved += 1;
      else if (dispatch.reason === "tao-plan") this.#counts.dispatches.planned += 1;
      else this.#counts.dispatches.routed += 1;
      if (dispatch.reason === "tao-plan" || dispatch.reason === "tao-reserved") this.#countApplied(dispatch.call.programId);
    }
    const expiry = this.#book.earliestUntil();
    const wakes = [pumped.holdUntil, expiry].filter((at): at is number => at !== undefined);
    return { dispatches, needsPlan: pumped.needsPlan, held: pumped.held, wakeAt: wakes.length === 0 ? undefined : Math.min(...wakes) };
  }

  /** A call left its engine: KV a held program may now fit in. */
  callEnded(): void {
    this.#book.callEnded();
  }

  /** The program is over: its reservation, if any, is released. */
  programEnded(programId: string, engines: readonly EngineState[]): void {
    this.#book.release(programId, new Map(engines.map((engine) => [engine.id, engine])));
  }

  get reservationsHeld(): number {
    return this.#book.size;
  }

  stats(): TaoPlacementStats {
    const plan = this.#pump.plan;
    const c = this.#counts;
    return {
      ...c,
      planner: { ...c.planner },
      skipped: { ...c.skipped },
      dispatches: { ...c.dispatches },
      reservations: { ...c.reservations },
      snapshotPrograms: { mean: c.plans > 0 ? this.#snapshotProgramsSum / c.plans : 0, max: this.#snapshotProgramsMax },
      plan:
        plan === undefined
          ? undefined
          : { at: plan.at, validUntil: plan.validUntil, method: plan.method, entries: plan.entries.length, reserves: plan.entries.filter((e) => e.kind === "reserve").length },
      reservationsHeld: this.#book.size,
    };
  }

  #plan(queue: ProgramQueue, engines: readonly EngineState[], now: number): void {
    this.#pump.clear();
    this.#applied = new Set();
    const { settings, signals, hooks, stopwatch } = this.#options;
    const started = stopwatch?.() ?? 0;
    let snapshot: TaoSnapshot;
    let plan: TaoPlan;
    try {
      const betweenCalls = settings.reservationTtlMs > 0 ? signals.betweenCalls().filter((p) => !this.#book.has(p.programId)) : [];
      snapshot = this.#snapshot(
        queue.peekOrder(now).map((d) => d.call),
        betweenCalls,
        engines,
        now,
      );
      if (snapshot.programs.length === 0) return;
      plan = planPlacement(snapshot, settings.tao.planner, { stats: this.#counts.planner });
    } catch (error) {
      this.#pump.fail();
      this.#counts.planErrors += 1;
      hooks?.onPlanError?.(error);
      return;
    }
    this.#pump.install(plan, snapshot);
    this.#counts.plans += 1;
    this.#snapshotProgramsSum += snapshot.programs.length;
    this.#snapshotProgramsMax = Math.max(this.#snapshotProgramsMax, snapshot.programs.length);
    hooks?.onPlan?.(plan, (stopwatch?.() ?? 0) - started, snapshot.programs.length);
  }

  #countApplied(programId: string): void {
    if (this.#applied.has(programId)) return;
    this.#applied.add(programId);
    this.#counts.appliedEntries += 1;
  }

  #snapshot(queued: readonly QueuedCall[], betweenCalls: readonly { programId: string; contextTokens: number }[], engines: readonly EngineState[], now: number): TaoSnapshot {
    const { signals, settings, kv, dispatch } = this.#options;
    return buildSnapshot({
      at: now,
      queued,
      betweenCalls,
      engines: this.#book.engineViews(engines, (id) => kv.view(id), kv.kvTarget, dispatch.saturation),
      readiness: signals.readiness,
      credits: signals.credits,
      outputAllowanceTokens: settings.outputAllowanceTokens,
    });
  }

  /** The live state the pending entries are checked against (readiness asked of reservingPrograms only). */
  #liveSnapshot(byProgram: ReadonlyMap<string, Dequeued[]>, pending: readonly TaoPlanEntry[], engines: readonly EngineState[], now: number): TaoSnapshot {
    const queued = [...byProgram.values()].flatMap((calls) => calls.map((d) => d.call));
    const reserving = reservingPrograms(byProgram, pending);
    const betweenCalls = this.#options.signals.betweenCalls().filter((p) => reserving.has(p.programId));
    return this.#snapshot(queued, betweenCalls, engines, now);
  }
}
