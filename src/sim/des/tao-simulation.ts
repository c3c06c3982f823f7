/*
 * What the simulator adds around the pool core's TAO placement ("agentix-tao"). The
 * placement itself (plans, their application, holds, reservations) and the tool
 * signals it plans with are the core's (core/pool-core.ts, core/tao/), the very code
 * the pool runs; this file plays the parts outside the pool:
 *
 * - the clients: what a pool sees of a simulated program's tools (tool-events.ts). A
 *   completed call's answer names its tool calls with arguments (the facts the core's
 *   tool signals read); for a share of programs the client also sends tool-started
 *   events then, and tool-finished with its next call;
 * - the cadence: plan at a pump whose inputs may have changed, at most once per
 *   `replanIntervalMs` of virtual time (0: every time) or when no plan is in force;
 *   wake-ups (the simulator's pump events) when a program's predicted next call enters
 *   the readiness horizon, when a reused plan may be replaced, and whenever the core's
 *   round says time alone changes something;
 * - the tally: the readiness prediction made when each tool phase started, against
 *   when the call arrived (the predictor's own tally is of the prediction in force).
 */

import type { CallFacts, CallToolCall } from "../../core/tao/tool-signals.js";
import type { PoolCore } from "../../core/pool-core.js";
import type { TaoPlan } from "../../core/tao/planner.js";
import type { TaoPlacementStats } from "../../core/tao/tao-placement.js";
import type { StaleReason } from "../../core/tao/plan-validation.js";
import { READINESS_SOURCES, type ReadinessErrorReport, readinessErrorReport, type ReadinessSource } from "../../core/tao/readiness.js";
import { DEFAULT_TAO_SETTINGS, defaultTaoPlacementSettings, type TaoPlacementSettings, type TaoSettings } from "../../core/tao/settings.js";
import type { ToolEvent } from "../../protocol/tool-events.js";
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

export interface TaoSimulationOptions {
  /** The core's TAO settings (readiness, cache credit, planner); default DEFAULT_TAO_SETTINGS. */
  settings?: TaoSettings;
  /** Least virtual time between two plans (ms); default 0: plan whenever the inputs changed. */
  replanIntervalMs?: number;
  /** Longest a reservation is held (ms); default the core's (readiness horizon + 500 ms); 0 makes none. */
  reservationTtlMs?: number;
  /** Longest a program the plan left out (no KV room) is held before it is routed anyway (ms); default the core's; 0 routes at once. */
  holdLeftOutMs?: number;
  /** KV tokens a planned call needs beyond its prompt; default the core's. */
  outputAllowanceTokens?: number;
  /** Which clients send tool events and what arguments look like; defaults in tool-events.ts. */
  toolEvents?: Partial<ToolEventSettings>;
  /** Called after each plan with the planner's wall time (kept out of the deterministic result). */
  onPlan?: (info: { wallMs: number; plan: TaoPlan }) => void;
}

export type TaoSkipReason = StaleReason;

/** The core's TAO figures for a run (core/tao/tao-placement.ts), with what the simulator adds. */
export interface TaoRunStats extends Omit<TaoPlacementStats, "planErrors" | "plan" | "reservationsHeld"> {
  /** Pumps that used the previous plan because replanIntervalMs had not passed. */
  plansReused: number;
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
  /** The prediction made when its current tool phase started. */
  phase: { readyAt: number; source: ReadinessSource } | undefined;
  /** Tool runs of the current phase: toolCallId per call that will end it. */
  runs: Map<number, string>;
}

/** The core's placement settings from the simulator's knobs (the core's defaults for what is not given). */
export function taoPlacementSettings(options: TaoSimulationOptions = {}): TaoPlacementSettings {
  const defaults = defaultTaoPlacementSettings(options.settings ?? DEFAULT_TAO_SETTINGS);
  return {
    tao: defaults.tao,
    reservationTtlMs: options.reservationTtlMs ?? defaults.reservationTtlMs,
    holdLeftOutMs: options.holdLeftOutMs ?? defaults.holdLeftOutMs,
    outputAllowanceTokens: options.outputAllowanceTokens ?? defaults.outputAllowanceTokens,
  };
}

export class TaoSimulation {
  readonly #core: PoolCore;
  readonly #settings: TaoPlacementSettings;
  readonly #replanIntervalMs: number;
  readonly #toolEvents: ToolEventSettings;
  readonly #wake: (at: number) => void;
  readonly #programs = new Map<string, ProgramState>();
  readonly #startPairs = new Map<ReadinessSource, { predictedAt: number; actualAt: number }[]>();
  #planAt = Number.NEGATIVE_INFINITY;
  #plansReused = 0;
  #eventPrograms = 0;
  #lastWake = Number.NaN;

  constructor(core: PoolCore, settings: TaoPlacementSettings, options: TaoSimulationOptions, wake: (at: number) => void) {
    this.#core = core;
    this.#settings = settings;
    this.#replanIntervalMs = options.replanIntervalMs ?? 0;
    if (!(Number.isFinite(this.#replanIntervalMs) && this.#replanIntervalMs >= 0)) {
      throw new RangeError(`replanIntervalMs must be a finite number >= 0, got ${this.#replanIntervalMs}`);
    }
    this.#toolEvents = { ...DEFAULT_TOOL_EVENT_SETTINGS, ...options.toolEvents };
    validateToolEventSettings(this.#toolEvents);
    this.#wake = wake;
  }

  programStarted(spec: ProgramSpec): void {
    const events = sendsToolEvents(spec, this.#toolEvents);
    if (events) this.#eventPrograms += 1;
    this.#programs.set(spec.programId, { spec, events, phase: undefined, runs: new Map() });
  }

  /** A call of the program is about to reach the pool: the client's tool-finished event first, if it sends events. */
  callReady(programId: string, call: CallSpec, now: number): void {
    const program = this.#program(programId);
    if (program.phase === undefined) return;
    // This call ends the program's tool phase.
    const id = program.runs.get(call.callId);
    if (program.events) this.#send(programId, [{ type: "tool_finished", tool: TOOL_NAMES[program.spec.kind], thread: call.thread, ...(id === undefined ? {} : { tool_call_id: id }) }], now);
    this.#tallyStart(program.phase, now);
    program.phase = undefined;
    program.runs.clear();
  }

  /** The facts of a completed call's answer: its usage, and the tool calls whose results the calls it made due will read. */
  answerFacts(programId: string, usage: NonNullable<CallFacts["usage"]>, next: readonly CallSpec[]): CallFacts {
    const program = this.#program(programId);
    const tool = TOOL_NAMES[program.spec.kind];
    const toolCalls: CallToolCall[] = next.map((call) => ({ tool, toolCallId: toolCallId(program.spec, call), args: toolArguments(program.spec, call, this.#toolEvents) }));
    return { usage, toolCalls };
  }

  /** After the core saw the call leave: if a tool phase began, the client's tool-started events, the tally's prediction, a wake-up at the horizon. */
  callLeft(programId: string, facts: CallFacts, next: readonly CallSpec[], now: number): void {
    const program = this.#program(programId);
    if (next.length === 0 || this.#core.signals.readiness.predictReadyAt(programId, now).status === "in-call") return;
    const toolCalls = facts.toolCalls ?? [];
    if (program.events) {
      this.#send(
        programId,
        toolCalls.map((run, i) => ({
          type: "tool_started" as const,
          thread: next[i]?.thread ?? "main",
          ...(run.tool === undefined ? {} : { tool: run.tool }),
          ...(run.toolCallId === undefined ? {} : { tool_call_id: run.toolCallId }),
          ...(run.args === undefined ? {} : { arguments: run.args }),
        })),
        now,
      );
    }
    next.forEach((call, i) => program.runs.set(call.callId, toolCalls[i]?.toolCallId as string));
    const prediction = this.#core.signals.readiness.predictReadyAt(programId, now);
    if (prediction.readyAt !== undefined && prediction.source !== undefined) {
      program.phase = { readyAt: prediction.readyAt, source: prediction.source };
      const horizon = prediction.readyAt - this.#settings.tao.readiness.readySoonMs;
      if (horizon > now) this.wakeAt(horizon);
    }
  }

  programFinished(programId: string): void {
    this.#programs.delete(programId);
  }

  /** Whether this pump plans: the interval has passed, or no plan is in force. */
  planNow(now: number): boolean {
    if (now - this.#planAt >= this.#replanIntervalMs || this.#core.wantsPlan(now)) {
      this.#planAt = now;
      return true;
    }
    this.#plansReused += 1;
    this.wakeAt(this.#planAt + this.#replanIntervalMs);
    return false;
  }

  wakeAt(at: number): void {
    // Several asks for one instant need one wake-up: the pump coalesces the rest.
    if (at === this.#lastWake) return;
    this.#lastWake = at;
    this.#wake(at);
  }

  stats(): TaoRunStats {
    const core = this.#core.taoStats();
    if (core === undefined) throw new Error("TaoSimulation needs a pool core with TAO placement");
    const atToolStart = {} as Record<ReadinessSource | "all", ReadinessErrorReport>;
    const tolerance = this.#settings.tao.readiness.errorToleranceMs;
    const all: { predictedAt: number; actualAt: number }[] = [];
    for (const source of READINESS_SOURCES) {
      const pairs = this.#startPairs.get(source) ?? [];
      atToolStart[source] = readinessErrorReport(pairs, tolerance);
      all.push(...pairs);
    }
    atToolStart.all = readinessErrorReport(all, tolerance);
    return {
      plans: core.plans,
      planner: core.planner,
      snapshotPrograms: core.snapshotPrograms,
      plansReused: this.#plansReused,
      appliedEntries: core.appliedEntries,
      skipped: core.skipped,
      blocked: core.blocked,
      dispatches: core.dispatches,
      heldMax: core.heldMax,
      reservations: core.reservations,
      eventPrograms: this.#eventPrograms,
      readiness: { atToolStart, inForceAtArrival: this.#core.signals.readiness.accuracy() },
    };
  }

  #send(programId: string, events: ToolEvent[], now: number): void {
    if (events.length > 0) this.#core.toolEvents(programId, events, now, now);
  }

  #program(programId: string): ProgramState {
    const program = this.#programs.get(programId);
    if (program === undefined) throw new Error(`TAO simulation: unknown program ${programId}`);
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
}
