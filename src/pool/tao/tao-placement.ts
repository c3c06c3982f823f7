import { type Dispatch, type DispatchSettings, takeDispatches } from "../../core/dispatch.js";
import { type EngineState, isAvailable } from "../../core/engines.js";
import type { Dequeued, ProgramQueue, QueuedCall } from "../../core/queue.js";
import { pickEngine } from "../../core/routing.js";
import { applyPlan, queuedByProgram } from "../../core/tao/apply-plan.js";
import { type StaleReason, validatePlan } from "../../core/tao/plan-validation.js";
import { createPlannerStats, planPlacement, type PlannerStats, type TaoPlan, type TaoPlanEntry } from "../../core/tao/planner.js";
import { buildSnapshot, engineFreeTokens } from "../../core/tao/snapshot-builder.js";
import type { TaoEngine, TaoSnapshot } from "../../core/tao/snapshot.js";
import type { PoolTaoSettings } from "./config.js";
import { type ReservationOutcome, Reservations } from "./reservations.js";
import type { ToolSignals } from "./tool-signals.js";

/*
 * TAO placement in the pool (scheduling.placement = "tao"). The core decides: the
 * snapshot (buildSnapshot), the plan (planPlacement), its re-validation (validatePlan)
 * and its application to the queue (applyPlan). This file decides when, and what
 * happens around them.
 *
 * WHICH calls go first is still the program queue's order (PLAS/ATLAS levels, tenant
 * fairness, anti-starvation promotion); TAO decides WHERE they run. A pump walks the
 * queued programs in that order (queuedByProgram), and each program's calls go
 *   - to its plan entry's engine, when the current plan has a valid entry for it
 *     (consecutive such programs are applied together by applyPlan, which keeps their
 *     order and checks each engine's slots and saturation with isAvailable); a call
 *     whose engine has no free slot stays queued while the plan lives (the program
 *     waits for its cache, at most planTtlMs), and the programs after it go on;
 *   - by the core's routing rule (pickEngine), when the plan saw the program queued and
 *     left it out (no KV capacity for it in the plan): nothing starves for want of a
 *     plan entry;
 *   - nowhere yet, when the program's calls arrived after the plan was made, or its
 *     entry went stale: they wait for the next plan, which the pump asks for, and so
 *     do all programs after them in the queue's order (a call the plan never saw must
 *     not be overtaken by those it saw; the next plan, at most replanMinIntervalMs
 *     away, places them all).
 * One exception to the queue's order: a program whose reservation is held takes its
 * slot first (the capacity was set aside for it).
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

export interface TaoPump {
  dispatches: Dispatch[];
  /** Calls are waiting that no plan covers yet (new, or their entry went stale): plan again. */
  needsPlan: boolean;
}

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
  readonly #reservations: Reservations;
  readonly #plannerStats = createPlannerStats();
  /** KV tokens of the calls running on each engine (prompt + output allowance). */
  readonly #committed = new Map<string, number>();
  #plan: TaoPlan | undefined;
  /** Programs the plan's snapshot had queued: those without an entry were left out on purpose. */
  #planQueued = new Set<string>();
  /** Programs of the plan whose entry is used up (calls sent, or reserved) or went stale: not re-validated. */
  #handled = new Set<string>();
  #failed = false;
  #planErrors = 0;

  constructor(options: PoolTaoPlacementOptions) {
    this.#options = options;
    this.#reservations = new Reservations(options.hooks?.onReservation);
  }

  /** A call went to the engine (any path): its KV is committed there until it ends. */
  callDispatched(engineId: string, promptTokens: number): void {
    this.#committed.set(engineId, (this.#committed.get(engineId) ?? 0) + promptTokens + this.#options.settings.outputAllowanceTokens);
  }

  callReleased(engineId: string, promptTokens: number): void {
    const left = (this.#committed.get(engineId) ?? 0) - promptTokens - this.#options.settings.outputAllowanceTokens;
    this.#committed.set(engineId, Math.max(0, left));
  }

  /** Makes a new plan from the live state; undefined when there is nothing to place (or planning failed). */
  plan(queue: ProgramQueue, engines: readonly EngineState[], now: number): TaoPlan | undefined {
    this.#expire(now, engines);
    this.#plan = undefined;
    this.#planQueued = new Set();
    this.#handled = new Set();
    let snapshot: TaoSnapshot;
    let plan: TaoPlan;
    const started = performance.now();
    try {
      const betweenCalls = this.#options.settings.reservationTtlMs > 0 ? this.#options.signals.betweenCalls().filter((p) => !this.#reservations.has(p.programId)) : [];
      snapshot = this.#snapshot(queue.peekOrder(now).map((d) => d.call), betweenCalls, engines, now);
      if (snapshot.programs.length === 0) {
        this.#failed = false;
        return undefined;
      }
      plan = planPlacement(snapshot, this.#options.settings.core.planner, { stats: this.#plannerStats });
    } catch (error) {
      this.#failed = true;
      this.#planErrors += 1;
      this.#options.hooks?.onPlanError?.(error);
      return undefined;
    }
    this.#failed = false;
    this.#plan = plan;
    for (const program of snapshot.programs) if (program.queued) this.#planQueued.add(program.programId);
    this.#options.hooks?.onPlan?.(plan, performance.now() - started);
    return plan;
  }

  /** Hands out what the plan (or, for calls it left out, routing) places now. */
  pump(queue: ProgramQueue, engines: EngineState[], now: number): TaoPump {
    const { dispatch } = this.#options;
    this.#expire(now, engines);
    const dispatches = this.#claimReservations(queue, engines, now);
    if (this.#failed) {
      dispatches.push(...takeDispatches(queue, engines, now, dispatch));
      return { dispatches, needsPlan: queue.size > 0 };
    }
    const plan = this.#plan;
    if (plan === undefined || now > plan.validUntil) {
      if (plan !== undefined) this.#dropPlan();
      // Queued calls need a plan now; programs between calls are re-planned by the periodic round.
      return { dispatches, needsPlan: queue.size > 0 };
    }
    if (!engines.some((engine) => isAvailable(engine, dispatch.saturation))) return { dispatches, needsPlan: false };

    const byProgram = queuedByProgram(queue, now);
    const pending = plan.entries.filter((entry) => !this.#handled.has(entry.programId));
    let needsPlan = false;
    const valid = new Map<string, TaoPlanEntry>();
    if (pending.length > 0) {
      const validation = validatePlan({ ...plan, entries: pending }, this.#liveSnapshot(byProgram, pending, engines, now));
      for (const { entry, reason } of validation.skipped) {
        this.#options.hooks?.onStale?.(reason);
        this.#handled.add(entry.programId);
        needsPlan = true;
      }
      for (const entry of validation.apply) valid.set(entry.programId, entry);
    }

    const held = this.#reservations.heldMap();
    let segment: TaoPlanEntry[] = [];
    const flush = () => {
      if (segment.length === 0) return;
      const application = applyPlan(queue, engines, now, segment, dispatch.saturation, held);
      for (const programId of application.converted) this.#reservations.used(programId);
      dispatches.push(...application.dispatches);
      // An entry is used up once its calls are out; a blocked one keeps trying while the plan lives.
      const blocked = new Set(application.blocked.map((entry) => entry.programId));
      for (const entry of segment) if (!blocked.has(entry.programId)) this.#handled.add(entry.programId);
      segment = [];
    };
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
      if (engine !== undefined) {
        this.#reservations.hold(entry.programId, engine, entry.tokens, now, this.#options.settings.reservationTtlMs, dispatch.saturation);
      }
    }
    // A program that held a slot elsewhere does not need it any more.
    const byId = new Map(engines.map((engine) => [engine.id, engine]));
    for (const d of dispatches) if (this.#reservations.has(d.call.programId)) this.#reservations.release(d.call.programId, byId);
    return { dispatches, needsPlan };
  }

  stats(): TaoPlacementStats {
    const plan = this.#plan;
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
      reservationsHeld: this.#reservations.size,
      committedTokens: Object.fromEntries(this.#committed),
    };
  }

  get reservationsHeld(): number {
    return this.#reservations.size;
  }

  /** Routes a left-out program's calls one by one; false once no engine can take any call. */
  #route(queue: ProgramQueue, engines: EngineState[], now: number, calls: readonly Dequeued[], out: Dispatch[]): boolean {
    const { routing, saturation } = this.#options.dispatch;
    for (const queued of calls) {
      const choice = pickEngine(queued.call, engines, routing, saturation);
      if (choice === undefined) return false;
      const call = queue.remove(queued.call.callId);
      if (call === undefined) continue;
      choice.engine.inFlight += 1;
      out.push({ call, engineId: choice.engine.id, level: queued.level, promoted: queued.promoted, reason: choice.reason });
    }
    return true;
  }

  /** Programs holding a reservation whose call has arrived go to the reserved engine first. */
  #claimReservations(queue: ProgramQueue, engines: EngineState[], now: number): Dispatch[] {
    if (this.#reservations.size === 0 || queue.size === 0) return [];
    const held = this.#reservations.heldMap();
    // applyPlan passes over the programs that have no call yet (it lists them as reserves).
    const entries: TaoPlanEntry[] = [...held].map(([programId, engineId]) => ({ programId, engineId, kind: "reserve", tokens: 0, units: 0, credit: 0, ready: true }));
    const application = applyPlan(queue, engines, now, entries, this.#options.dispatch.saturation, held);
    for (const programId of application.converted) this.#reservations.used(programId);
    return application.dispatches;
  }

  #expire(now: number, engines: readonly EngineState[]): void {
    if (this.#reservations.size === 0) return;
    this.#reservations.expire(now, new Map(engines.map((engine) => [engine.id, engine])));
  }

  #dropPlan(): void {
    this.#plan = undefined;
    this.#planQueued = new Set();
    this.#handled = new Set();
  }

  #engines(engines: readonly EngineState[]): TaoEngine[] {
    const { saturation } = this.#options.dispatch;
    return engines.map((engine) => {
      const capacity = this.#options.kvCapacityTokens.get(engine.id) ?? 0;
      const committed = (this.#committed.get(engine.id) ?? 0) + this.#reservations.tokensOn(engine.id);
      const used = capacity > 0 ? Math.max(engine.kvUsage, committed / capacity) : 1;
      return { engineId: engine.id, freeTokens: engineFreeTokens({ ...engine, kvUsage: used }, capacity, saturation) };
    });
  }

  #snapshot(
    queued: readonly QueuedCall[],
    betweenCalls: readonly { programId: string; contextTokens: number }[],
    engines: readonly EngineState[],
    now: number,
  ): TaoSnapshot {
    const { signals, settings } = this.#options;
    return buildSnapshot({
      at: now,
      queued,
      betweenCalls,
      engines: this.#engines(engines),
      readiness: signals.readiness,
      credits: signals.credits,
      outputAllowanceTokens: settings.outputAllowanceTokens,
    });
  }

  /**
   * The live state the pending entries are checked against. Only the pending reserve
   * entries' programs are asked for readiness: asking uses a program's readiness probe
   * (readiness.ts), and a program the plan did not reserve for must keep its probe
   * for the next plan.
   */
  #liveSnapshot(byProgram: ReadonlyMap<string, Dequeued[]>, pending: readonly TaoPlanEntry[], engines: readonly EngineState[], now: number): TaoSnapshot {
    const queued = [...byProgram.values()].flatMap((calls) => calls.map((d) => d.call));
    const reserving = new Set(pending.filter((e) => e.kind === "reserve" && !byProgram.has(e.programId)).map((e) => e.programId));
    const betweenCalls = this.#options.signals.betweenCalls().filter((p) => reserving.has(p.programId));
    return this.#snapshot(queued, betweenCalls, engines, now);
  }
}
