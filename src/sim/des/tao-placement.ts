/*
 * TAO placement in the simulator ("agentix-tao"): Agentix's program queue orders the
 * calls, and the core's TAO planner decides which waiting programs go to which engine.
 * Everything it decides with comes from the core (src/core/tao): the readiness
 * predictor, the cache-credit ledger, buildSnapshot, planPlacement, and TaoPump with
 * its ReservationBook. What this file adds is what the pool would add around them:
 *
 * Feeding the predictor and the ledger, from what a pool sees of a simulated program:
 * - a call completes: the ledger observes (engine, prompt + completion tokens, cached
 *   tokens the engine reported); when the program has no other call queued or in
 *   flight, its tool phase starts: callCompleted with the tool calls its response
 *   named (tool-events.ts), and for programs whose client sends events, toolStarted;
 * - the program's next call arrives: for those clients toolFinished, then callArrived.
 * Readiness is keyed by program (a parallel program's phase ends at its first call).
 *
 * Which calls go where at each pump is the pool's rule, run by the same core code:
 * TaoPump (core/tao/tao-pump.ts: priority walk, plan application, routing fallback for
 * programs the plan left out, stale stop, reservation claim) and its ReservationBook
 * (core/tao/reservation-book.ts: reservations with their ttl, and KV used = the larger
 * of the scraped figure and what is committed on the engine). What this file adds is
 * the simulator's cadence:
 *
 * When to plan: at every pump (a call queued or finished, a scrape, a wake-up) whose
 * inputs may have changed, but at most once per `replanIntervalMs` of virtual time
 * (0: every time). Wake-ups are scheduled when a program's predicted next call enters
 * the readiness horizon, when a reservation runs out, and when a reused plan may be
 * replaced.
 */

import type { Dispatch, DispatchSettings } from "../../core/dispatch.js";
import type { EngineState } from "../../core/engines.js";
import type { ProgramQueue, QueuedCall } from "../../core/queue.js";
import { CacheCreditLedger } from "../../core/tao/cache-credit.js";
import type { StaleReason } from "../../core/tao/plan-validation.js";
import { createPlannerStats, planPlacement, type PlannerStats, type TaoPlan } from "../../core/tao/planner.js";
import {
  type CompletedToolCall,
  READINESS_SOURCES,
  type ReadinessErrorReport,
  readinessErrorReport,
  ReadinessPredictor,
  type ReadinessSource,
} from "../../core/tao/readiness.js";
import { DEFAULT_HOLD_LEFT_OUT_MS, DEFAULT_TAO_SETTINGS, type TaoSettings, validateTaoSettings } from "../../core/tao/settings.js";
import { ReservationBook } from "../../core/tao/reservation-book.js";
import { buildSnapshot } from "../../core/tao/snapshot-builder.js";
import type { TaoSnapshot } from "../../core/tao/snapshot.js";
import { reservingPrograms, TaoPump } from "../../core/tao/tao-pump.js";
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
  /** Longest a program the plan left out (no KV room) is held before it is routed anyway (ms); default DEFAULT_HOLD_LEFT_OUT_MS; 0 routes at once. */
  holdLeftOutMs?: number;
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
  /** Calls by how they went out: the plan's engine, a held reservation, or routing (left-out programs once overdue). */
  dispatches: { planned: number; reserved: number; routed: number };
  /** Most programs the plan left out that one pump held in the queue (no KV room for them). */
  heldMax: number;
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

export interface TaoPlacementParams {
  engines: EngineState[];
  kvCapacityTokens: number;
  /** Routing (for programs a plan leaves out) and saturation: the queue's dispatch settings. */
  dispatch: DispatchSettings;
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
  readonly #dispatch: DispatchSettings;
  readonly #wake: (at: number) => void;

  readonly #readiness: ReadinessPredictor;
  readonly #credits: CacheCreditLedger;
  readonly #programs = new Map<string, ProgramState>();
  /** Programs in a tool phase (no call queued or in flight), in the order their phase began. */
  readonly #betweenCalls = new Set<string>();
  readonly #book: ReservationBook;
  readonly #pump: TaoPump;
  readonly #startPairs = new Map<ReadinessSource, { predictedAt: number; actualAt: number }[]>();

  #planAt = Number.NEGATIVE_INFINITY;
  /** Programs of the current plan that got a call out by it, or its reservation. */
  #applied = new Set<string>();
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
    this.#dispatch = params.dispatch;
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
      dispatches: { planned: 0, reserved: 0, routed: 0 },
      heldMax: 0,
      reservations: { made: 0, used: 0, expired: 0, released: 0 },
      eventPrograms: 0,
    };
    this.#book = new ReservationBook((outcome, programId, reservation) => {
      if (outcome === "held") {
        this.#stats.reservations.made += 1;
        this.#countApplied(programId);
        this.#wakeAt(reservation.until);
      } else {
        this.#stats.reservations[outcome] += 1;
      }
    });
    const holdLeftOutMs = options.holdLeftOutMs ?? DEFAULT_HOLD_LEFT_OUT_MS;
    this.#pump = new TaoPump({ dispatch: this.#dispatch, reservationTtlMs: this.#reservationTtlMs, holdLeftOutMs }, this.#book, {
      onStale: (reason) => {
        this.#stats.skipped[reason] += 1;
      },
      onBlocked: () => {
        this.#stats.blocked += 1;
      },
    });
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
    this.#book.callStarted(engineId, tokens);
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
    this.#book.callEnded(engineId, committedTokens);
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
    this.#book.release(programId, this.#byId);
    this.#programs.delete(programId);
    this.#betweenCalls.delete(programId);
    this.#readiness.forget(programId);
    this.#credits.forgetProgram(programId);
  }

  /** One pump: hand out what the current (or a new) plan places; returns the dispatches in order. */
  pump(queue: ProgramQueue, now: number): Dispatch[] {
    this.#pump.expire(now, this.#engines);
    // A call that takes its held slot goes before planning, as in the pool (it claims at the call's arrival).
    const claimed = this.#pump.claimReservations(queue, this.#engines, now);
    const current = this.#pump.plan;
    const expired = current !== undefined && now > current.validUntil;
    const due = now - this.#planAt >= this.#replanIntervalMs;
    if (due || expired || current === undefined) {
      const snapshot = this.#snapshot(queue.peekOrder(now).map((d) => d.call), now);
      this.#applied = new Set();
      if (snapshot.programs.length > 0) {
        this.#pump.install(this.#planOnce(snapshot), snapshot);
        this.#planAt = now;
      } else {
        this.#pump.clear();
      }
    } else {
      this.#stats.plansReused += 1;
      this.#wakeAt(this.#planAt + this.#replanIntervalMs);
    }
    const { dispatches: pumped, held, holdUntil } = this.#pump.pump(queue, this.#engines, now, (byProgram, pending) =>
      this.#snapshot([...byProgram.values()].flatMap((calls) => calls.map((d) => d.call)), now, reservingPrograms(byProgram, pending)),
    );
    // A held program is routed once overdue (a call that ends re-plans it sooner).
    this.#stats.heldMax = Math.max(this.#stats.heldMax, held);
    if (holdUntil !== undefined) this.#wakeAt(holdUntil);
    const dispatches = [...claimed, ...pumped];
    for (const dispatch of dispatches) {
      if (dispatch.reason === "tao-reserved") this.#stats.dispatches.reserved += 1;
      else if (dispatch.reason === "tao-plan") this.#stats.dispatches.planned += 1;
      else this.#stats.dispatches.routed += 1;
      if (dispatch.reason === "tao-plan" || dispatch.reason === "tao-reserved") this.#countApplied(dispatch.call.programId);
    }
    return dispatches;
  }

  #countApplied(programId: string): void {
    if (this.#applied.has(programId)) return;
    this.#applied.add(programId);
    this.#stats.appliedEntries += 1;
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

  /** `only`: the programs between calls to include (default: all not holding a reservation). */
  #snapshot(queued: readonly QueuedCall[], now: number, only?: ReadonlySet<string>): TaoSnapshot {
    const betweenCalls: { programId: string; contextTokens: number }[] = [];
    // Without reservations, programs in a tool phase are not in the plan at all.
    for (const programId of this.#reservationTtlMs === 0 ? [] : this.#betweenCalls) {
      if (only === undefined ? this.#book.has(programId) : !only.has(programId)) continue;
      betweenCalls.push({ programId, contextTokens: this.#programs.get(programId)?.contextTokens ?? 0 });
    }
    return buildSnapshot({
      at: now,
      queued,
      betweenCalls,
      engines: this.#book.engineViews(this.#engines, () => this.#capacity, this.#dispatch.saturation),
      readiness: this.#readiness,
      credits: this.#credits,
      outputAllowanceTokens: this.#allowance,
    });
  }
}
