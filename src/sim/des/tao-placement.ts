/*
 * TAO placement in the simulator ("agentix-tao"): Agentix's program queue orders the
 * calls, and the core's TAO planner decides which waiting programs go to which engine.
 * Everything it decides with comes from the core (src/core/tao): the readiness
 * predictor, the cache-credit ledger, buildSnapshot, planPlacement, validatePlan and
 * applyPlan. What this file adds is what the pool would add around them:
 *
 * Feeding the predictor and the ledger, from what a pool sees of a simulated program:
 * - a call completes: the ledger observes (engine, prompt + completion tokens, cached
 *   tokens the engine reported); when the program has no other call queued or in
 *   flight, its tool phase starts: callCompleted with the tool calls its response
 *   named (tool-events.ts), and for programs whose client sends events, toolStarted;
 * - the program's next call arrives: for those clients toolFinished, then callArrived.
 * Readiness is keyed by program (a parallel program's phase ends at its first call).
 *
 * Engines' free KV (engineFreeTokens): the pool's scrape of kvUsage lags dispatches
 * and leaves out requests still waiting in the engine, so the KV counted as used is
 * the larger of the scraped figure and what the pool has committed there: its
 * in-flight calls' prompt + output, and held reservations.
 *
 * When to plan: at every pump (a call queued or finished, a scrape, a wake-up) whose
 * inputs may have changed, but at most once per `replanIntervalMs` of virtual time
 * (0: every time). A plan used at a later pump is re-validated against the live state
 * first; its stale entries are skipped and counted by reason. Wake-ups are scheduled
 * when a program's predicted next call enters the readiness horizon and when a
 * reservation runs out.
 *
 * Reservations: a valid reserve entry holds, for at most `reservationTtlMs`, the
 * program's tokens in the KV estimate and one of the engine's slots (a placeholder in
 * inFlight; the pool's engines take only a small buffer of calls, so a slot is what a
 * returning program would otherwise wait for). When the program's call arrives it
 * goes to that engine at the next pump, taking the placeholder's slot.
 */

import type { Dispatch } from "../../core/dispatch.js";
import { type EngineState, isAvailable, type SaturationSettings } from "../../core/engines.js";
import type { ProgramQueue } from "../../core/queue.js";
import { applyPlan } from "../../core/tao/apply-plan.js";
import { CacheCreditLedger } from "../../core/tao/cache-credit.js";
import { type StaleReason, validatePlan } from "../../core/tao/plan-validation.js";
import { createPlannerStats, planPlacement, type PlannerStats, type TaoPlan, type TaoPlanEntry } from "../../core/tao/planner.js";
import {
  type CompletedToolCall,
  READINESS_SOURCES,
  type ReadinessErrorReport,
  readinessErrorReport,
  ReadinessPredictor,
  type ReadinessSource,
} from "../../core/tao/readiness.js";
import { DEFAULT_TAO_SETTINGS, type TaoSettings, validateTaoSettings } from "../../core/tao/settings.js";
import { buildSnapshot, engineFreeTokens } from "../../core/tao/snapshot-builder.js";
import type { TaoEngine, TaoSnapshot } from "../../core/tao/snapshot.js";
import type { CallSpec, ProgramSpec } from "../workload/program-spec.js";
import {
  DEFAULT_TOOL_EVENT_SETTINGS,
  sendsToolEvents,
  TOOL_NAMES,
  toolArguments,
  toolCallId,
  type ToolEventSettings,
  validateToolEventSettings,
} from "./tool-events.js";

export interface TaoPlacementOptions {
  /** The core's TAO settings; default DEFAULT_TAO_SETTINGS. */
  settings?: TaoSettings;
  /** Least virtual time between two plans (ms); default 0: plan whenever the inputs changed. */
  replanIntervalMs?: number;
  /** Longest a reservation is held (ms); default the readiness horizon + 500 ms; 0 makes none. */
  reservationTtlMs?: number;
  /** KV tokens a call needs beyond its prompt, in the plan; default 256 (coding-agent outputs: mean 164, p99 ~ 600). */
  outputAllowanceTokens?: number;
  /** Which clients send tool events and what arguments look like; defaults in tool-events.ts. */
  toolEvents?: Partial<ToolEventSettings>;
  /** Called after each plan with the planner's wall time (kept out of the deterministic result). */
  onPlan?: (info: { wallMs: number; plan: TaoPlan }) => void;
}

export type TaoSkipReason = StaleReason;

export interface TaoRunStats {
  /** Planner calls (snapshots with at least one program). */
  plans: number;
  planner: PlannerStats;
  /** Programs per planned snapshot (queued ones and reservation candidates). */
  snapshotPrograms: { mean: number; max: number };
  /** Pumps that used the previous plan because replanIntervalMs had not passed. */
  plansReused: number;
  /** Plan entries whose program got at least one call out, or its reservation. */
  appliedEntries: number;
  /** Entries skipped as stale when re-validated, by reason. */
  skipped: Record<StaleReason, number>;
  /** Valid entries whose engine had no free slot (or went unhealthy) when applied. */
  blocked: number;
  dispatches: { planned: number; reserved: number };
  reservations: {
    made: number;
    /** The program's call arrived and took the held slot. */
    used: number;
    /** Ran out (ttl) before the call arrived. */
    expired: number;
    /** The program's call went to another engine, or the program ended. */
    released: number;
  };
  /** Programs whose client sent tool events. */
  eventPrograms: number;
  readiness: {
    /** The prediction made when the tool phase started (what a reservation is decided on), against the arrival. */
    atToolStart: Record<ReadinessSource | "all", ReadinessErrorReport>;
    /** The predictor's own tally: the prediction in force when the call arrived. */
    inForceAtArrival: Record<ReadinessSource | "all", ReadinessErrorReport>;
  };
}

interface ProgramState {
  readonly spec: ProgramSpec;
  readonly events: boolean;
  /** Calls queued or in flight. */
  live: number;
  /** Prompt + completion tokens of its last completed call: what its next call re-sends. */
  contextTokens: number;
  /** The prediction made when its current tool phase started. */
  phase: { readyAt: number; source: ReadinessSource } | undefined;
  /** Tool runs of the current phase: toolCallId per call that will end it. */
  runs: Map<number, string>;
}

interface Reservation {
  engineId: string;
  tokens: number;
  until: number;
}

export interface TaoPlacementParams {
  engines: EngineState[];
  kvCapacityTokens: number;
  saturation: SaturationSettings;
  options?: TaoPlacementOptions;
  /** Asks the simulator for a pump at `at` (a wake-up). */
  wake: (at: number) => void;
}

function zeroSkips(): Record<StaleReason, number> {
  return { "plan-expired": 0, "program-gone": 0, "engine-gone": 0, "call-gone": 0, "not-ready": 0, "program-grew": 0, capacity: 0 };
}

export class TaoPlacement {
  readonly #settings: TaoSettings;
  readonly #replanIntervalMs: number;
  readonly #reservationTtlMs: number;
  readonly #allowance: number;
  readonly #toolEvents: ToolEventSettings;
  readonly #onPlan: TaoPlacementOptions["onPlan"];
  readonly #engines: EngineState[];
  readonly #byId: Map<string, EngineState>;
  readonly #capacity: number;
  readonly #saturation: SaturationSettings;
  readonly #wake: (at: number) => void;

  readonly #readiness: ReadinessPredictor;
  readonly #credits: CacheCreditLedger;
  readonly #programs = new Map<string, ProgramState>();
  /** Programs in a tool phase (no call queued or in flight), in the order their phase began. */
  readonly #betweenCalls = new Set<string>();
  readonly #committed = new Map<string, number>();
  readonly #reservations = new Map<string, Reservation>();
  readonly #startPairs = new Map<ReadinessSource, { predictedAt: number; actualAt: number }[]>();

  #plan: TaoPlan | undefined;
  #planAt = Number.NEGATIVE_INFINITY;
  /** Programs of the current plan already handled (dispatched or reserved): not re-validated. */
  #handled = new Set<string>();
  #lastWake = Number.NaN;

  readonly #stats: Omit<TaoRunStats, "readiness" | "snapshotPrograms">;
  #snapshotProgramsSum = 0;
  #snapshotProgramsMax = 0;

  constructor(params: TaoPlacementParams) {
    const options = params.options ?? {};
    this.#settings = options.settings ?? DEFAULT_TAO_SETTINGS;
    validateTaoSettings(this.#settings);
    this.#replanIntervalMs = options.replanIntervalMs ?? 0;
    if (!(Number.isFinite(this.#replanIntervalMs) && this.#replanIntervalMs >= 0)) {
      throw new RangeError(`replanIntervalMs must be a finite number >= 0, got ${this.#replanIntervalMs}`);
    }
    this.#reservationTtlMs = options.reservationTtlMs ?? this.#settings.readiness.readySoonMs + 500;
    if (!(Number.isFinite(this.#reservationTtlMs) && this.#reservationTtlMs >= 0)) {
      throw new RangeError(`reservationTtlMs must be a finite number >= 0, got ${this.#reservationTtlMs}`);
    }
    this.#allowance = options.outputAllowanceTokens ?? 256;
    if (!(Number.isFinite(this.#allowance) && this.#allowance >= 0)) {
      throw new RangeError(`outputAllowanceTokens must be a finite number >= 0, got ${this.#allowance}`);
    }
    this.#toolEvents = { ...DEFAULT_TOOL_EVENT_SETTINGS, ...options.toolEvents };
    validateToolEventSettings(this.#toolEvents);
    this.#onPlan = options.onPlan;
    this.#engines = params.engines;
    this.#byId = new Map(params.engines.map((engine) => [engine.id, engine]));
    this.#capacity = params.kvCapacityTokens;
    this.#saturation = params.saturation;
    this.#wake = params.wake;
    this.#readiness = new ReadinessPredictor(this.#settings.readiness);
    this.#credits = new CacheCreditLedger(this.#settings.cacheCredit);
    this.#stats = {
      plans: 0,
      planner: createPlannerStats(),
      plansReused: 0,
      appliedEntries: 0,
      skipped: zeroSkips(),
      blocked: 0,
      dispatches: { planned: 0, reserved: 0 },
      reservations: { made: 0, used: 0, expired: 0, released: 0 },
      eventPrograms: 0,
    };
  }

  programStarted(spec: ProgramSpec): void {
    const events = sendsToolEvents(spec, this.#toolEvents);
    if (events) this.#stats.eventPrograms += 1;
    this.#programs.set(spec.programId, { spec, events, live: 0, contextTokens: 0, phase: undefined, runs: new Map() });
  }

  /** A call of the program was issued (the edge forwarded it to the pool). */
  callReady(programId: string, call: CallSpec, now: number): void {
    const program = this.#program(programId);
    if (program.live === 0 && program.phase !== undefined) {
      // This call ends the program's tool phase.
      const id = program.runs.get(call.callId);
      if (program.events) this.#readiness.toolFinished({ programId, at: now, tool: TOOL_NAMES[program.spec.kind], ...(id === undefined ? {} : { toolCallId: id }) });
      this.#tallyStart(program.phase, now);
    }
    this.#readiness.callArrived({ programId, at: now });
    program.phase = undefined;
    program.runs.clear();
    program.live += 1;
    this.#betweenCalls.delete(programId);
  }

  /** A call went to an engine with this many KV tokens (prompt + output). */
  callDispatched(engineId: string, tokens: number): void {
    this.#committed.set(engineId, (this.#committed.get(engineId) ?? 0) + tokens);
  }

  /**
   * A call finished. `next` lists the calls this completion made due (issued after
   * their tool gap): the tool runs of the phase that starts now, if the program has
   * nothing else queued or in flight.
   */
  callFinished(
    programId: string,
    engineId: string,
    committedTokens: number,
    usage: { promptTokens: number; completionTokens: number; cachedTokens: number },
    next: readonly CallSpec[],
    now: number,
  ): void {
    this.#committed.set(engineId, Math.max(0, (this.#committed.get(engineId) ?? 0) - committedTokens));
    const contextTokens = usage.promptTokens + usage.completionTokens;
    this.#credits.observe({ programId, engineId, at: now, contextTokens, cachedTokens: usage.cachedTokens });
    const program = this.#program(programId);
    program.live -= 1;
    program.contextTokens = contextTokens;
    if (program.live > 0 || next.length === 0) return;

    const tool = TOOL_NAMES[program.spec.kind];
    const toolCalls: CompletedToolCall[] = next.map((call) => ({ tool, toolCallId: toolCallId(program.spec, call), args: toolArguments(program.spec, call, this.#toolEvents) }));
    this.#readiness.callCompleted({ programId, at: now, toolCalls });
    if (program.events) {
      for (const run of toolCalls) this.#readiness.toolStarted({ programId, at: now, tool, ...(run.toolCallId === undefined ? {} : { toolCallId: run.toolCallId }), args: run.args });
    }
    next.forEach((call, i) => program.runs.set(call.callId, toolCalls[i]?.toolCallId as string));
    const prediction = this.#readiness.predictReadyAt(programId, now);
    if (prediction.readyAt !== undefined && prediction.source !== undefined) {
      program.phase = { readyAt: prediction.readyAt, source: prediction.source };
      const horizon = prediction.readyAt - this.#settings.readiness.readySoonMs;
      if (horizon > now) this.#wakeAt(horizon);
    }
    this.#betweenCalls.add(programId);
  }

  programFinished(programId: string): void {
    this.#release(programId);
    this.#programs.delete(programId);
    this.#betweenCalls.delete(programId);
    this.#readiness.forget(programId);
    this.#credits.forgetProgram(programId);
  }

  /** One pump: hand out what the current (or a new) plan places; returns the dispatches in order. */
  pump(queue: ProgramQueue, now: number): Dispatch[] {
    this.#expireReservations(now);
    const dispatches = this.#claimReservations(queue, now);

    const expired = this.#plan !== undefined && now > this.#plan.validUntil;
    const due = now - this.#planAt >= this.#replanIntervalMs;
    let live: TaoSnapshot | undefined;
    if (due || expired || this.#plan === undefined) {
      live = this.#snapshot(queue, now);
      this.#plan = undefined;
      this.#handled = new Set();
      if (live.programs.length > 0) {
        this.#plan = this.#planOnce(live);
        this.#planAt = now;
      }
    } else {
      this.#stats.plansReused += 1;
      this.#wakeAt(this.#planAt + this.#replanIntervalMs);
    }
    const plan = this.#plan;
    if (plan === undefined) return dispatches;

    const pending = plan.entries.filter((entry) => !this.#handled.has(entry.programId));
    if (pending.length === 0) return dispatches;
    live ??= this.#snapshot(queue, now);
    const validation = validatePlan({ ...plan, entries: pending }, live);
    for (const { reason } of validation.skipped) this.#stats.skipped[reason] += 1;
    const held = new Map([...this.#reservations].map(([programId, r]) => [programId, r.engineId]));
    const application = applyPlan(queue, this.#engines, now, validation.apply, this.#saturation, held);
    this.#stats.blocked += application.blocked.length;
    for (const programId of application.converted) this.#useReservation(programId);
    for (const dispatch of application.dispatches) {
      if (!this.#handled.has(dispatch.call.programId)) this.#stats.appliedEntries += 1;
      this.#handled.add(dispatch.call.programId);
      if (dispatch.reason === "tao-reserved") this.#stats.dispatches.reserved += 1;
      else this.#stats.dispatches.planned += 1;
      // A program that held a slot elsewhere does not need it any more.
      if (this.#reservations.has(dispatch.call.programId)) this.#release(dispatch.call.programId);
    }
    for (const entry of application.reserve) this.#reserve(entry, now);
    dispatches.push(...application.dispatches);
    return dispatches;
  }

  /** One planner call, timed and counted. */
  #planOnce(snapshot: TaoSnapshot): TaoPlan {
    const start = performance.now();
    const plan = planPlacement(snapshot, this.#settings.planner, { stats: this.#stats.planner });
    const wallMs = performance.now() - start;
    this.#stats.plans += 1;
    this.#snapshotProgramsSum += snapshot.programs.length;
    this.#snapshotProgramsMax = Math.max(this.#snapshotProgramsMax, snapshot.programs.length);
    this.#onPlan?.({ wallMs, plan });
    return plan;
  }

  stats(): TaoRunStats {
    const atToolStart = {} as Record<ReadinessSource | "all", ReadinessErrorReport>;
    const tolerance = this.#settings.readiness.errorToleranceMs;
    const all: { predictedAt: number; actualAt: number }[] = [];
    for (const source of READINESS_SOURCES) {
      const pairs = this.#startPairs.get(source) ?? [];
      atToolStart[source] = readinessErrorReport(pairs, tolerance);
      all.push(...pairs);
    }
    atToolStart.all = readinessErrorReport(all, tolerance);
    return {
      ...this.#stats,
      planner: { ...this.#stats.planner },
      snapshotPrograms: { mean: this.#stats.plans > 0 ? this.#snapshotProgramsSum / this.#stats.plans : 0, max: this.#snapshotProgramsMax },
      skipped: { ...this.#stats.skipped },
      dispatches: { ...this.#stats.dispatches },
      reservations: { ...this.#stats.reservations },
      readiness: { atToolStart, inForceAtArrival: this.#readiness.accuracy() },
    };
  }

  #program(programId: string): ProgramState {
    const program = this.#programs.get(programId);
    if (program === undefined) throw new Error(`TAO placement: unknown program ${programId}`);
    return program;
  }

  #tallyStart(phase: { readyAt: number; source: ReadinessSource }, actualAt: number): void {
    let pairs = this.#startPairs.get(phase.source);
    if (pairs === undefined) {
      pairs = [];
      this.#startPairs.set(phase.source, pairs);
    }
    pairs.push({ predictedAt: phase.readyAt, actualAt });
  }

  #wakeAt(at: number): void {
    // Several asks for one instant need one wake-up: the pump coalesces the rest.
    if (at === this.#lastWake) return;
    this.#lastWake = at;
    this.#wake(at);
  }

  #snapshot(queue: ProgramQueue, now: number): TaoSnapshot {
    const engines: TaoEngine[] = this.#engines.map((engine) => {
      const used = Math.max(engine.kvUsage, (this.#committed.get(engine.id) ?? 0) / this.#capacity);
      return { engineId: engine.id, freeTokens: engineFreeTokens({ ...engine, kvUsage: used }, this.#capacity, this.#saturation) };
    });
    const betweenCalls: { programId: string; contextTokens: number }[] = [];
    // Without reservations, programs in a tool phase are not in the plan at all.
    for (const programId of this.#reservationTtlMs === 0 ? [] : this.#betweenCalls) {
      if (this.#reservations.has(programId)) continue;
      betweenCalls.push({ programId, contextTokens: this.#programs.get(programId)?.contextTokens ?? 0 });
    }
    return buildSnapshot({
      at: now,
      queued: queue.peekOrder(now).map((d) => d.call),
      betweenCalls,
      engines,
      readiness: this.#readiness,
      credits: this.#credits,
      outputAllowanceTokens: this.#allowance,
    });
  }

  #reserve(entry: TaoPlanEntry, now: number): void {
    this.#handled.add(entry.programId);
    if (this.#reservations.has(entry.programId) || this.#reservationTtlMs === 0) return;
    const engine = this.#byId.get(entry.engineId);
    if (engine === undefined || !isAvailable(engine, this.#saturation)) {
      this.#stats.blocked += 1;
      return;
    }
    engine.inFlight += 1;
    this.#committed.set(engine.id, (this.#committed.get(engine.id) ?? 0) + entry.tokens);
    const until = now + this.#reservationTtlMs;
    this.#reservations.set(entry.programId, { engineId: engine.id, tokens: entry.tokens, until });
    this.#stats.appliedEntries += 1;
    this.#stats.reservations.made += 1;
    this.#wakeAt(until);
  }

  /** Frees the held slot and tokens: the reservation was not used. */
  #release(programId: string, outcome: "released" | "expired" = "released"): void {
    const reservation = this.#reservations.get(programId);
    if (reservation === undefined) return;
    this.#reservations.delete(programId);
    const engine = this.#byId.get(reservation.engineId);
    if (engine !== undefined) engine.inFlight = Math.max(0, engine.inFlight - 1);
    this.#committed.set(reservation.engineId, Math.max(0, (this.#committed.get(reservation.engineId) ?? 0) - reservation.tokens));
    this.#stats.reservations[outcome] += 1;
  }

  /** The program's call took the held slot: the placeholder became the call. */
  #useReservation(programId: string): void {
    const reservation = this.#reservations.get(programId);
    if (reservation === undefined) return;
    this.#reservations.delete(programId);
    this.#committed.set(reservation.engineId, Math.max(0, (this.#committed.get(reservation.engineId) ?? 0) - reservation.tokens));
    this.#stats.reservations.used += 1;
  }

  #expireReservations(now: number): void {
    for (const [programId, reservation] of [...this.#reservations]) {
      if (reservation.until > now) continue;
      this.#release(programId, "expired");
    }
  }

  /** Programs holding a reservation whose call arrived go to the reserved engine first. */
  #claimReservations(queue: ProgramQueue, now: number): Dispatch[] {
    if (this.#reservations.size === 0) return [];
    const entries: TaoPlanEntry[] = [];
    for (const [programId, r] of this.#reservations) {
      if (this.#betweenCalls.has(programId)) continue;
      entries.push({ programId, engineId: r.engineId, kind: "reserve", tokens: r.tokens, units: 0, credit: 0, ready: true });
    }
    if (entries.length === 0) return [];
    const held = new Map([...this.#reservations].map(([programId, r]) => [programId, r.engineId]));
    const application = applyPlan(queue, this.#engines, now, entries, this.#saturation, held);
    for (const programId of application.converted) this.#useReservation(programId);
    for (const dispatch of application.dispatches) {
      if (dispatch.reason === "tao-reserved") this.#stats.dispatches.reserved += 1;
      else this.#stats.dispatches.planned += 1;
      this.#handled.add(dispatch.call.programId);
    }
    return application.dispatches;
  }
}
