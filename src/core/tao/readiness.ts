/*
 * Readiness predictor: when will a program's next LLM call arrive? Between two calls
 * an agent runs tools; TAO holds capacity (and the program's cache) for a program
 * whose next call is due within `readySoonMs`, and not for one still running a
 * four-minute test suite.
 *
 * Evidence, highest precedence first, per tool run:
 *   (a) tool-finished:  the client said the tool finished: ready at that instant;
 *   (b) client-hint:    expected duration and/or deadline sent with tool-started
 *                       (both: the earlier of start + expected and the deadline);
 *   (c) tool-arguments: a wait written in the arguments (`sleep 5`, `time.sleep(2)`,
 *                       `setTimeout(f, 500)`, `timeout 30 ...`; see tool-args.ts);
 *   (d) tool-history:   median of the tool's recent durations, then
 *       global-history: median across all tools;
 *   (e) fallback:       `fallbackMs` after the start.
 * A program waits for all its tool runs (an agent may start several in one turn):
 * its ready time is that of its latest unfinished run, and once all finished, the
 * last finish.
 *
 * Without any client event, the pool still sees the call complete (with the
 * response's tool_calls, which name the tools and carry their arguments) and the
 * next call arrive: that gap is the observation, recorded under the tool's name (or
 * "unknown"). With events, the observation is finish − start.
 *
 * Staleness, by the time of the latest evidence ("madeAt"):
 *   - older than `maxPredictionAgeMs`: dropped (status "expired"; not ready);
 *   - its ready time passed with no call: ONE probe: ready at the first instant it is
 *     asked about after that time (asking again at that same instant says ready
 *     again, so one planning round may ask twice), unready from then on ("spent").
 *   New evidence (a tool event) makes a fresh prediction with a fresh probe.
 *
 * The key is a program ID; a caller that wants readiness per thread of a parallel
 * program may use "programId/threadId" as the key. Pure: every time is passed in.
 */

import { DurationHistory } from "./duration-history.js";
import { type ReadinessSettings, validateReadinessSettings } from "./settings.js";
import { waitInArgumentsMs } from "./tool-args.js";

export type ReadinessSource = "tool-finished" | "client-hint" | "tool-arguments" | "tool-history" | "global-history" | "fallback";

export const READINESS_SOURCES: readonly ReadinessSource[] = ["tool-finished", "client-hint", "tool-arguments", "tool-history", "global-history", "fallback"];

/** History bucket of durations whose tool is not known. */
export const UNKNOWN_TOOL = "unknown";

/** Tool names and call ids are client text: kept to this length. */
const MAX_NAME_CHARS = 128;
/** Tool runs kept per phase (an agent starts a handful per turn; clients may send junk). */
const MAX_RUNS_PER_PHASE = 64;

export interface ToolStartedEvent {
  programId: string;
  at: number;
  tool?: string;
  /** Matches this event to a tool call of the completed LLM call, and to its finish event. */
  toolCallId?: string;
  /** Client hint: how long the tool is expected to run (ms). */
  expectedMs?: number;
  /** Client hint: the tool will have finished by then (same clock as `at`). */
  deadline?: number;
  /** The tool call's arguments: JSON string, parsed object, or command text. */
  args?: unknown;
}

export interface ToolFinishedEvent {
  programId: string;
  at: number;
  tool?: string;
  toolCallId?: string;
}

export interface CompletedToolCall {
  tool?: string;
  toolCallId?: string;
  args?: unknown;
}

export interface CallCompletedEvent {
  programId: string;
  at: number;
  /** The tool calls in the response, when the pool saw them. */
  toolCalls?: readonly CompletedToolCall[];
}

export interface CallArrivedEvent {
  programId: string;
  at: number;
}

/**
 * unknown: never seen (or forgotten); in-call: its call is with the pool, no tool
 * phase; pending: ready time not yet passed; probe: ready time passed, probe not yet
 * used (or used at this very instant); spent: probe used; expired: evidence too old.
 */
export type ReadinessStatus = "unknown" | "in-call" | "pending" | "probe" | "spent" | "expired";

export interface ReadinessPrediction {
  status: ReadinessStatus;
  /** Predicted arrival of the next call; absent for unknown / in-call. */
  readyAt?: number;
  source?: ReadinessSource;
  /** Time of the latest evidence. */
  madeAt?: number;
}

export interface ReadinessErrorReport {
  count: number;
  /** NaN when count is 0. */
  meanAbsErrorMs: number;
  /** Share of pairs with |predicted - actual| <= tolerance; NaN when count is 0. */
  withinToleranceShare: number;
}

/** Mean absolute error and share within tolerance (default 0.5 s) of (predicted, actual) times. */
export function readinessErrorReport(pairs: readonly { predictedAt: number; actualAt: number }[], toleranceMs = 500): ReadinessErrorReport {
  let sum = 0;
  let within = 0;
  for (const { predictedAt, actualAt } of pairs) {
    const error = Math.abs(predictedAt - actualAt);
    if (!Number.isFinite(error)) throw new RangeError(`prediction pair must be finite, got (${predictedAt}, ${actualAt})`);
    sum += error;
    if (error <= toleranceMs) within += 1;
  }
  const count = pairs.length;
  return { count, meanAbsErrorMs: count === 0 ? Number.NaN : sum / count, withinToleranceShare: count === 0 ? Number.NaN : within / count };
}

interface ToolRun {
  /** toolCallId when known, otherwise a synthetic key. */
  key: string;
  tool: string;
  startedAt: number;
  /** Set by a tool-started event (not only inferred from the call's completion). */
  explicitStart: boolean;
  /** Stands for "some tool" after a call whose response named none. */
  placeholder: boolean;
  args?: unknown;
  readyAt: number;
  source: ReadinessSource;
  finishedAt?: number;
}

interface Phase {
  startedAt: number;
  madeAt: number;
  runs: ToolRun[];
  /** The instant the probe was used, once used. */
  probeAt?: number;
}

interface ProgramRecord {
  inCall: boolean;
  phase?: Phase;
}

interface ErrorTally {
  count: number;
  sumAbs: number;
  within: number;
}

function requireEvent(event: { programId: unknown; at: unknown }): void {
  if (typeof event !== "object" || event === null) throw new TypeError("a readiness event must be an object");
  if (typeof event.programId !== "string" || event.programId === "") throw new TypeError("programId must be a non-empty string");
  if (typeof event.at !== "number" || !Number.isFinite(event.at)) throw new RangeError(`at must be a finite number, got ${String(event.at)}`);
}

function optionalName(name: unknown, field: string): string | undefined {
  if (name === undefined) return undefined;
  if (typeof name !== "string") throw new TypeError(`${field} must be a string when present`);
  const trimmed = name.slice(0, MAX_NAME_CHARS);
  return trimmed === "" ? undefined : trimmed;
}

export class ReadinessPredictor {
  readonly #programs = new Map<string, ProgramRecord>();
  readonly #history: DurationHistory;
  readonly #errors = new Map<ReadinessSource, ErrorTally>();
  #syntheticKeys = 0;

  constructor(private readonly settings: ReadinessSettings) {
    validateReadinessSettings(settings);
    this.#history = new DurationHistory(settings);
  }

  /** A tool started (client event). */
  toolStarted(event: ToolStartedEvent): void {
    requireEvent(event);
    const tool = optionalName(event.tool, "tool");
    const toolCallId = optionalName(event.toolCallId, "toolCallId");
    if (event.expectedMs !== undefined && !(Number.isFinite(event.expectedMs) && event.expectedMs >= 0)) {
      throw new RangeError(`expectedMs must be a finite number >= 0, got ${event.expectedMs}`);
    }
    if (event.deadline !== undefined && !Number.isFinite(event.deadline)) {
      throw new RangeError(`deadline must be a finite number, got ${event.deadline}`);
    }
    const record = this.#record(event.programId);
    const phase = this.#phaseFor(record, event.at);
    // Explicit events describe the tools better than an "unknown" placeholder.
    phase.runs = phase.runs.filter((run) => !run.placeholder || run.finishedAt !== undefined);
    const open = (run: ToolRun) => !run.explicitStart && run.finishedAt === undefined;
    let run =
      (toolCallId !== undefined ? phase.runs.find((r) => r.key === toolCallId && r.finishedAt === undefined) : undefined) ??
      (tool !== undefined ? phase.runs.find((r) => open(r) && r.tool === tool) : undefined);
    if (run === undefined) {
      run = this.#newRun(toolCallId, tool, event.at, event.args);
      addRun(phase, run);
    }
    if (tool !== undefined) run.tool = tool;
    run.placeholder = false;
    run.startedAt = event.at;
    run.explicitStart = true;
    if (event.args !== undefined) run.args = event.args;
    const predicted = this.#predictRun(run, event.expectedMs, event.deadline);
    run.readyAt = predicted.readyAt;
    run.source = predicted.source;
    this.#freshEvidence(phase, event.at);
  }

  /** A tool finished (client event): evidence (a), and an observed duration. */
  toolFinished(event: ToolFinishedEvent): void {
    requireEvent(event);
    const tool = optionalName(event.tool, "tool");
    const toolCallId = optionalName(event.toolCallId, "toolCallId");
    const record = this.#record(event.programId);
    const phase = this.#phaseFor(record, event.at);
    const unfinished = phase.runs.filter((r) => r.finishedAt === undefined).sort((a, b) => a.startedAt - b.startedAt);
    let run =
      (toolCallId !== undefined ? unfinished.find((r) => r.key === toolCallId) : undefined) ??
      (tool !== undefined ? unfinished.find((r) => r.tool === tool) : undefined) ??
      unfinished[0];
    if (run === undefined) {
      // A finish we never saw start: still proof the program is about to call.
      run = this.#newRun(toolCallId, tool, event.at, undefined);
      addRun(phase, run);
    } else {
      this.#history.record(run.tool, event.at - run.startedAt);
    }
    run.finishedAt = event.at;
    this.#freshEvidence(phase, event.at);
  }

  /** The pool finished an LLM call of the program; its tool phase starts now. */
  callCompleted(event: CallCompletedEvent): void {
    requireEvent(event);
    if (event.toolCalls !== undefined && !Array.isArray(event.toolCalls)) throw new TypeError("toolCalls must be an array when present");
    const record = this.#record(event.programId);
    record.inCall = false;
    const phase = this.#phaseFor(record, event.at);
    const calls = event.toolCalls ?? [];
    for (const call of calls) {
      const tool = optionalName(call.tool, "tool");
      const toolCallId = optionalName(call.toolCallId, "toolCallId");
      // A tool-started event may have come first: attach to it rather than duplicate.
      const known =
        (toolCallId !== undefined ? phase.runs.find((r) => r.key === toolCallId) : undefined) ??
        (tool !== undefined ? phase.runs.find((r) => r.explicitStart && r.tool === tool && r.args === undefined) : undefined);
      if (known !== undefined) {
        if (known.args === undefined && call.args !== undefined) known.args = call.args;
        continue;
      }
      const run = this.#newRun(toolCallId, tool, event.at, call.args);
      const predicted = this.#predictRun(run, undefined, undefined);
      run.readyAt = predicted.readyAt;
      run.source = predicted.source;
      addRun(phase, run);
    }
    if (phase.runs.length === 0) {
      // No tool named: the program may think, run something we cannot see, or be done.
      const run = this.#newRun(undefined, undefined, event.at, undefined);
      run.placeholder = true;
      const predicted = this.#predictRun(run, undefined, undefined);
      run.readyAt = predicted.readyAt;
      run.source = predicted.source;
      addRun(phase, run);
    }
    this.#freshEvidence(phase, event.at);
  }

  /** The program's next call arrived: closes the tool phase and records what was observed. */
  callArrived(event: CallArrivedEvent): void {
    requireEvent(event);
    const record = this.#record(event.programId);
    const phase = record.phase;
    if (phase !== undefined) {
      const predicted = phaseReadyAt(phase);
      this.#tallyError(predicted.source, predicted.readyAt, event.at);
      const unfinished = phase.runs.filter((r) => r.finishedAt === undefined);
      if (unfinished.length > 0) {
        // No finish event: the gap since the tools started is the observation.
        const first = unfinished[0] as ToolRun;
        const sameTool = unfinished.every((r) => r.tool === first.tool);
        const startedAt = Math.min(...unfinished.map((r) => r.startedAt));
        this.#history.record(sameTool ? first.tool : UNKNOWN_TOOL, event.at - startedAt);
      }
    }
    record.phase = undefined;
    record.inCall = true;
  }

  /** The prediction in force at `now`; does not use the probe. */
  predictReadyAt(programId: string, now: number): ReadinessPrediction {
    const record = this.#programs.get(programId);
    if (record === undefined) return { status: "unknown" };
    const phase = record.phase;
    if (phase === undefined) return { status: record.inCall ? "in-call" : "unknown" };
    const { readyAt, source } = phaseReadyAt(phase);
    let status: ReadinessStatus;
    if (now - phase.madeAt > this.settings.maxPredictionAgeMs) status = "expired";
    else if (now <= readyAt) status = "pending";
    else status = phase.probeAt === undefined || phase.probeAt === now ? "probe" : "spent";
    return { status, readyAt, source, madeAt: phase.madeAt };
  }

  /**
   * Is the program's next call expected within `readySoonMs` of `now`? A "probe"
   * answer uses the probe: later instants answer false until new evidence.
   */
  isReadySoon(programId: string, now: number): boolean {
    if (!Number.isFinite(now)) throw new RangeError(`now must be finite, got ${now}`);
    const prediction = this.predictReadyAt(programId, now);
    if (prediction.status === "pending") return (prediction.readyAt as number) - now <= this.settings.readySoonMs;
    if (prediction.status === "probe") {
      const phase = this.#programs.get(programId)?.phase;
      if (phase !== undefined) phase.probeAt = now;
      return true;
    }
    return false;
  }

  /** Programs in a tool phase that are ready soon at `now` (isReadySoon on each, so probes are used). */
  readySoonPrograms(now: number): string[] {
    const ready: string[] = [];
    for (const [programId, record] of this.#programs) {
      if (record.phase !== undefined && this.isReadySoon(programId, now)) ready.push(programId);
    }
    return ready;
  }

  /** Accuracy of the predictions in force when calls arrived, per source and overall. */
  accuracy(): Record<ReadinessSource | "all", ReadinessErrorReport> {
    const report = (t: ErrorTally | undefined): ReadinessErrorReport =>
      t === undefined || t.count === 0
        ? { count: 0, meanAbsErrorMs: Number.NaN, withinToleranceShare: Number.NaN }
        : { count: t.count, meanAbsErrorMs: t.sumAbs / t.count, withinToleranceShare: t.within / t.count };
    const all: ErrorTally = { count: 0, sumAbs: 0, within: 0 };
    const out = {} as Record<ReadinessSource | "all", ReadinessErrorReport>;
    for (const source of READINESS_SOURCES) {
      const tally = this.#errors.get(source);
      out[source] = report(tally);
      if (tally !== undefined) {
        all.count += tally.count;
        all.sumAbs += tally.sumAbs;
        all.within += tally.within;
      }
    }
    out.all = report(all);
    return out;
  }

  /** The median duration the history holds for a tool, if it has enough samples. */
  toolEstimateMs(tool: string): number | undefined {
    return this.#history.toolEstimate(tool, this.settings.minHistorySamples);
  }

  /** Drops a program (it ended). */
  forget(programId: string): void {
    this.#programs.delete(programId);
  }

  /** Drops programs whose prediction expired, and idle records; returns how many. */
  prune(now: number): number {
    let dropped = 0;
    for (const [programId, record] of this.#programs) {
      const phase = record.phase;
      const expired = phase !== undefined && now - phase.madeAt > this.settings.maxPredictionAgeMs;
      if ((phase === undefined && !record.inCall) || (expired && !record.inCall)) {
        this.#programs.delete(programId);
        dropped += 1;
      }
    }
    return dropped;
  }

  get programCount(): number {
    return this.#programs.size;
  }

  #record(programId: string): ProgramRecord {
    let record = this.#programs.get(programId);
    if (record === undefined) {
      record = { inCall: false };
      this.#programs.set(programId, record);
    }
    return record;
  }

  #phaseFor(record: ProgramRecord, at: number): Phase {
    if (record.phase === undefined) {
      record.phase = { startedAt: at, madeAt: at, runs: [] };
      record.inCall = false;
    }
    return record.phase;
  }

  #newRun(toolCallId: string | undefined, tool: string | undefined, at: number, args: unknown): ToolRun {
    this.#syntheticKeys += 1;
    return {
      key: toolCallId ?? `#${this.#syntheticKeys}`,
      tool: tool ?? UNKNOWN_TOOL,
      startedAt: at,
      explicitStart: false,
      placeholder: false,
      args,
      readyAt: at,
      source: "fallback",
    };
  }

  /** Evidence (b) to (e) for a run that has not finished. */
  #predictRun(run: ToolRun, expectedMs: number | undefined, deadline: number | undefined): { readyAt: number; source: ReadinessSource } {
    if (expectedMs !== undefined || deadline !== undefined) {
      const byExpected = expectedMs === undefined ? Number.POSITIVE_INFINITY : run.startedAt + expectedMs;
      return { readyAt: Math.min(byExpected, deadline ?? Number.POSITIVE_INFINITY), source: "client-hint" };
    }
    const waitMs = run.args === undefined ? undefined : waitInArgumentsMs(run.args);
    if (waitMs !== undefined) return { readyAt: run.startedAt + waitMs, source: "tool-arguments" };
    const min = this.settings.minHistorySamples;
    const toolMs = this.#history.toolEstimate(run.tool, min);
    if (toolMs !== undefined) return { readyAt: run.startedAt + toolMs, source: "tool-history" };
    const globalMs = this.#history.globalEstimate(min);
    if (globalMs !== undefined) return { readyAt: run.startedAt + globalMs, source: "global-history" };
    return { readyAt: run.startedAt + this.settings.fallbackMs, source: "fallback" };
  }

  #freshEvidence(phase: Phase, at: number): void {
    phase.madeAt = Math.max(phase.madeAt, at);
    phase.probeAt = undefined;
  }

  #tallyError(source: ReadinessSource, predictedAt: number, actualAt: number): void {
    let tally = this.#errors.get(source);
    if (tally === undefined) {
      tally = { count: 0, sumAbs: 0, within: 0 };
      this.#errors.set(source, tally);
    }
    const error = Math.abs(predictedAt - actualAt);
    tally.count += 1;
    tally.sumAbs += error;
    if (error <= this.settings.errorToleranceMs) tally.within += 1;
  }
}

function addRun(phase: Phase, run: ToolRun): void {
  phase.runs.push(run);
  if (phase.runs.length > MAX_RUNS_PER_PHASE) phase.runs.shift();
}

/** The program waits for all runs: the latest unfinished prediction, or the last finish. */
function phaseReadyAt(phase: Phase): { readyAt: number; source: ReadinessSource } {
  let best: { readyAt: number; source: ReadinessSource } | undefined;
  let lastFinish = Number.NEGATIVE_INFINITY;
  for (const run of phase.runs) {
    if (run.finishedAt !== undefined) {
      lastFinish = Math.max(lastFinish, run.finishedAt);
    } else if (best === undefined || run.readyAt > best.readyAt) {
      best = { readyAt: run.readyAt, source: run.source };
    }
  }
  if (best !== undefined) return best;
  return { readyAt: Number.isFinite(lastFinish) ? lastFinish : phase.madeAt, source: "tool-finished" };
}
