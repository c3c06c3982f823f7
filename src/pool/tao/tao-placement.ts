import type { DispatchSettings } from "../../core/dispatch.js";
import type { EngineState } from "../../core/engines.js";
import type { Dequeued, ProgramQueue, QueuedCall } from "../../core/queue.js";
import type { StaleReason } from "../../core/tao/plan-validation.js";
import { createPlannerStats, planPlacement, type PlannerStats, type TaoPlan, type TaoPlanEntry } from "../../core/tao/planner.js";
import { ReservationBook, type ReservationOutcome } from "../../core/tao/reservation-book.js";
import { buildSnapshot } from "../../core/tao/snapshot-builder.js";
import type { TaoSnapshot } from "../../core/tao/snapshot.js";
import { reservingPrograms, TaoPump, type TaoPumpResult } from "../../core/tao/tao-pump.js";
import type { PoolTaoSettings } from "./config.js";
import type { ToolSignals } from "./tool-signals.js";

/*
 * TAO placement in the pool (scheduling.placement = "tao"). The core decides: the
 * snapshot (buildSnapshot), the plan (planPlacement), its re-validation (validatePlan)
 * and its application to the queue (applyPlan). This file decides when, and what
 * happens around them.
 *
 * Which calls go where at each pump is the core's TaoPump (core/tao/tao-pump.ts: the
 * priority walk, plan application, routing fallback, stale stop and reservation claim),
 * and what is committed on each engine its ReservationBook (reservation-book.ts): the
 * simulator runs the same two.
 *
 * Plans are made off the request path (the caller runs plan() from a coalesced
 * setImmediate and a periodic timer, see plan-loop.ts) and applied at every pump until
 * they expire (planTtlMs); each pump re-validates the entries it has not used up
 * against the live state, counts the stale ones by reason, and applies the rest.
 *
 * Engines' free KV: capacity × (maxKvUsage − used), where used is the larger of the
 * scraped KV use (which lags dispatches) and what the pool has committed there (its
 * running calls' prompt + output allowance, and held reservations).
 *
 * If planning throws (a bug, not a state), the pump falls back to the core's routing
 * for every call until a plan succeeds again.
 */

export interface PoolTaoHooks {
  onPlan?(plan: TaoPlan, wallMs: number): void;
  onPlanError?(error: unknown): void;
  onStale?(reason: StaleReason): void;
  onReservation?(outcome: ReservationOutcome): void;
}

export interface PoolTaoPlacementOptions {
  settings: PoolTaoSettings;
  /** Routing and saturation of the fallback path, and the queue's settings. */
  dispatch: DispatchSettings;
  signals: ToolSignals;
  /** KV capacity per engine id (tokens). */
  kvCapacityTokens: ReadonlyMap<string, number>;
  hooks?: PoolTaoHooks;
}

export type { TaoPumpResult };

export interface TaoPlacementStats {
  planner: PlannerStats;
  planErrors: number;
  /** The plan in force, if any. */
  plan: { at: number; validUntil: number; method: TaoPlan["method"]; entries: number; reserves: number } | undefined;
  reservationsHeld: number;
  committedTokens: Record<string, number>;
}

export class PoolTaoPlacement {
  readonly #options: PoolTaoPlacementOptions;
  readonly #book: ReservationBook;
  readonly #pump: TaoPump;
  readonly #plannerStats = createPlannerStats();
  #planErrors = 0;

  constructor(options: PoolTaoPlacementOptions) {
    this.#options = options;
    const hooks = options.hooks;
    this.#book = new ReservationBook((outcome) => hooks?.onReservation?.(outcome));
    this.#pump = new TaoPump({ dispatch: options.dispatch, reservationTtlMs: options.settings.reservationTtlMs, holdLeftOutMs: options.settings.holdLeftOutMs }, this.#book, {
      onStale: (reason) => hooks?.onStale?.(reason),
    });
  }

  /** A call went to the engine (any path): its KV is committed there until it ends. */
  callDispatched(engineId: string, promptTokens: number): void {
    this.#book.callStarted(engineId, promptTokens + this.#options.settings.outputAllowanceTokens);
  }

  callReleased(engineId: string, promptTokens: number): void {
    this.#book.callEnded(engineId, promptTokens + this.#options.settings.outputAllowanceTokens);
  }

  /** Makes a new plan from the live state; undefined when there is nothing to place (or planning failed). */
  plan(queue: ProgramQueue, engines: readonly EngineState[], now: number): TaoPlan | undefined {
    this.#pump.expire(now, engines);
    this.#pump.clear();
    let snapshot: TaoSnapshot;
    let plan: TaoPlan;
    const started = performance.now();
    try {
      const betweenCalls = this.#options.settings.reservationTtlMs > 0 ? this.#options.signals.betweenCalls().filter((p) => !this.#book.has(p.programId)) : [];
      snapshot = this.#snapshot(queue.peekOrder(now).map((d) => d.call), betweenCalls, engines, now);
      if (snapshot.programs.length === 0) return undefined;
      plan = planPlacement(snapshot, this.#options.settings.core.planner, { stats: this.#plannerStats });
    } catch (error) {
      this.#pump.fail();
      this.#planErrors += 1;
      this.#options.hooks?.onPlanError?.(error);
      return undefined;
    }
    this.#pump.install(plan, snapshot);
    this.#options.hooks?.onPlan?.(plan, performance.now() - started);
    return plan;
  }

  /** Hands out what the plan (or, for calls it left out, routing) places now. */
  pump(queue: ProgramQueue, engines: EngineState[], now: number): TaoPumpResult {
    return this.#pump.pump(queue, engines, now, (byProgram, pending) => this.#liveSnapshot(byProgram, pending, engines, now));
  }

  stats(): TaoPlacementStats {
    const plan = this.#pump.plan;
    return {
      planner: { ...this.#plannerStats },
      planErrors: this.#planErrors,
      plan:
        plan === undefined
          ? undefined
          : {
              at: plan.at,
              validUntil: plan.validUntil,
              method: plan.method,
              entries: plan.entries.length,
              reserves: plan.entries.filter((e) => e.kind === "reserve").length,
            },
      reservationsHeld: this.#book.size,
      committedTokens: this.#book.callTokens(),
    };
  }

  get reservationsHeld(): number {
    return this.#book.size;
  }

  #snapshot(
    queued: readonly QueuedCall[],
    betweenCalls: readonly { programId: string; contextTokens: number }[],
    engines: readonly EngineState[],
    now: number,
  ): TaoSnapshot {
    const { signals, settings, kvCapacityTokens, dispatch } = this.#options;
    return buildSnapshot({
      at: now,
      queued,
      betweenCalls,
      engines: this.#book.engineViews(engines, (id) => kvCapacityTokens.get(id) ?? 0, dispatch.saturation),
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
