import type { ToolEvent } from "../../protocol/tool-events.js";
import { CacheCreditLedger } from "./cache-credit.js";
import { type ReadinessPrediction, ReadinessPredictor, type ReadinessSource } from "./readiness.js";
import type { TaoSettings } from "./settings.js";

/** What an engine's answer told: its usage, and the tool calls the model asked for. */
export interface CallUsage {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

export interface CallToolCall {
  tool?: string;
  toolCallId?: string;
  /** OpenAI's `function.arguments`: a JSON string. */
  args?: string;
}

export interface CallFacts {
  usage?: CallUsage;
  toolCalls?: CallToolCall[];
}

/*
 * What the pool knows about its programs between calls, for TAO (and, in the
 * simulator, what the same pool would know of a simulated program): the core's readiness
 * predictor and cache-credit ledger, fed from two sources.
 *
 * The pool's own call lifecycle (so a client that sends no events still yields
 * observations): a call arrives (callArrived: ends the program's tool phase, and the
 * gap since it began is an observed tool duration); a call completes (the ledger
 * observes the engine holding the program's context, prompt + completion tokens,
 * against the engine's reported cached_tokens; when the program has nothing else
 * queued or running, its tool phase starts: callCompleted with the tool calls the
 * answer named).
 *
 * The client's tool events, forwarded by the edge (POST /v1/events). A tool_finished
 * that arrives while the predictor already has the program's next call (status
 * "in-call") lost the race with that call: it is dropped, or it would open a phase the
 * program has already left.
 *
 * Keyed by program, as the planner's items are: a parallel program's tool phase starts
 * when its last running call completes, and ends at its first next call. Times are the
 * pool's clock; a client deadline is carried over by its distance from the edge's
 * signed timestamp, so edge–pool clock skew does not move it.
 *
 * Memory is bounded by prune(): programs leave once nothing is live and their tool
 * phase is over or expired; credits leave once decayed below a token.
 */

interface TrackedProgram {
  /** Calls queued or running in the pool. */
  live: number;
  /** Prompt + completion tokens of its last completed call: what its next call re-sends. */
  contextTokens: number;
  /** A call of it completed in this pool (so it has a context worth a reservation). */
  completedOnce: boolean;
}

export interface ToolSignalsHooks {
  /** A prediction was made or renewed (call completed, tool event). */
  onPrediction?(source: ReadinessSource): void;
  /** A tool event was applied, or dropped as stale. */
  onToolEvent?(type: ToolEvent["type"], outcome: "applied" | "stale"): void;
}

export interface CallEnd {
  /** The engine ran the call to its end (a complete answer). */
  completed: boolean;
  engineId?: string;
  facts?: CallFacts;
  /** The pool's own prompt estimate, used when the engine reported no usage. */
  promptTokensEstimate: number;
}

export interface ProgramSignals {
  programId: string;
  live: number;
  contextTokens: number;
  readiness: ReadinessPrediction;
  /** Cache credit (tokens) per engine where the program was seen. */
  credits: Record<string, number>;
}

export class ToolSignals {
  readonly readiness: ReadinessPredictor;
  readonly credits: CacheCreditLedger;
  readonly #programs = new Map<string, TrackedProgram>();
  /** Programs in a tool phase with nothing live, in the order their phase began. */
  readonly #betweenCalls = new Set<string>();
  readonly #hooks: ToolSignalsHooks;

  constructor(settings: TaoSettings, hooks: ToolSignalsHooks = {}) {
    this.readiness = new ReadinessPredictor(settings.readiness);
    this.credits = new CacheCreditLedger(settings.cacheCredit);
    this.#hooks = hooks;
  }

  callArrived(programId: string, now: number): void {
    const program = this.#program(programId);
    program.live += 1;
    this.#betweenCalls.delete(programId);
    this.readiness.callArrived({ programId, at: now });
  }

  /** A call left the pool: answered, failed, or abandoned. */
  callEnded(programId: string, now: number, end: CallEnd): void {
    const program = this.#programs.get(programId);
    if (program === undefined) return;
    program.live = Math.max(0, program.live - 1);
    if (end.completed && end.engineId !== undefined) {
      const usage = end.facts?.usage;
      const contextTokens = usage === undefined ? end.promptTokensEstimate : usage.promptTokens + usage.completionTokens;
      this.credits.observe({
        programId,
        engineId: end.engineId,
        at: now,
        contextTokens,
        ...(usage === undefined ? {} : { cachedTokens: usage.cachedTokens }),
      });
      program.contextTokens = contextTokens;
      program.completedOnce = true;
    }
    if (program.live > 0) return;
    if (!end.completed) {
      // No answer, so no tool phase: whatever the client does next is a fresh start.
      this.readiness.forget(programId);
      return;
    }
    const toolCalls = (end.facts?.toolCalls ?? []).map((call) => ({ tool: call.tool, toolCallId: call.toolCallId, args: call.args }));
    this.readiness.callCompleted({ programId, at: now, toolCalls });
    this.#betweenCalls.add(programId);
    this.#notePrediction(programId, now);
  }

  /**
   * Applies a forwarded batch. `edgeTs` is the batch's signed timestamp (edge clock),
   * against which a client deadline is carried over to this clock. Returns how many
   * events were applied (the rest were stale).
   */
  toolEvents(programId: string, events: readonly ToolEvent[], now: number, edgeTs: number): number {
    let applied = 0;
    for (const event of events) {
      const toolCallId = event.tool_call_id;
      if (event.type === "tool_started") {
        const deadline = event.deadline === undefined ? undefined : now + (event.deadline - edgeTs);
        this.readiness.toolStarted({
          programId,
          at: now,
          ...(event.tool === undefined ? {} : { tool: event.tool }),
          ...(toolCallId === undefined ? {} : { toolCallId }),
          ...(event.expected_duration_ms === undefined ? {} : { expectedMs: event.expected_duration_ms }),
          ...(deadline === undefined ? {} : { deadline }),
          ...(event.arguments === undefined ? {} : { args: event.arguments }),
        });
      } else {
        if (this.readiness.predictReadyAt(programId, now).status === "in-call") {
          this.#hooks.onToolEvent?.(event.type, "stale");
          continue;
        }
        this.readiness.toolFinished({
          programId,
          at: now,
          ...(event.tool === undefined ? {} : { tool: event.tool }),
          ...(toolCallId === undefined ? {} : { toolCallId }),
        });
      }
      applied += 1;
      this.#hooks.onToolEvent?.(event.type, "applied");
      const program = this.#programs.get(programId);
      // Only a program with a context here is worth holding capacity for.
      if (program !== undefined && program.live === 0 && program.completedOnce) this.#betweenCalls.add(programId);
      this.#notePrediction(programId, now);
    }
    return applied;
  }

  /** Programs between calls that may be reserved for, with the context their next call re-sends. */
  betweenCalls(): { programId: string; contextTokens: number }[] {
    const out: { programId: string; contextTokens: number }[] = [];
    for (const programId of this.#betweenCalls) out.push({ programId, contextTokens: this.#programs.get(programId)?.contextTokens ?? 0 });
    return out;
  }

  get betweenCallsCount(): number {
    return this.#betweenCalls.size;
  }

  get programCount(): number {
    return this.#programs.size;
  }

  /** What the pool knows of one program (inspection; does not use the readiness probe). */
  inspect(programId: string, now: number): ProgramSignals | undefined {
    const program = this.#programs.get(programId);
    const credits = this.credits.credits(programId, now);
    const readiness = this.readiness.predictReadyAt(programId, now);
    if (program === undefined && Object.keys(credits).length === 0 && readiness.status === "unknown") return undefined;
    return { programId, live: program?.live ?? 0, contextTokens: program?.contextTokens ?? 0, readiness, credits };
  }

  /** The program is over (it ended, or its client is gone for good): everything known of it goes. */
  forgetProgram(programId: string): void {
    this.#programs.delete(programId);
    this.#betweenCalls.delete(programId);
    this.readiness.forget(programId);
    this.credits.forgetProgram(programId);
  }

  /** Drops what no longer matters: expired tool phases, idle programs, credits under a token. */
  prune(now: number): void {
    this.readiness.prune(now);
    this.credits.prune(now, 1);
    for (const [programId, program] of this.#programs) {
      if (program.live > 0) continue;
      const status = this.readiness.predictReadyAt(programId, now).status;
      if (status === "pending" || status === "probe") continue;
      this.#betweenCalls.delete(programId);
      if (status === "unknown" || status === "expired" || status === "in-call") this.#programs.delete(programId);
    }
  }

  #program(programId: string): TrackedProgram {
    let program = this.#programs.get(programId);
    if (program === undefined) {
      program = { live: 0, contextTokens: 0, completedOnce: false };
      this.#programs.set(programId, program);
    }
    return program;
  }

  #notePrediction(programId: string, now: number): void {
    const source = this.readiness.predictReadyAt(programId, now).source;
    if (source !== undefined) this.#hooks.onPrediction?.(source);
  }
}
