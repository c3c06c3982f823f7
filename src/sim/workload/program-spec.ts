import type { AgentKind } from "./kinds.js";

/*
 * What the generator produces and the simulator consumes: programs as DAGs of LLM
 * calls. A call's prompt is
 *
 *   [system prompt (shared by every program of the mix entry)]
 *   [context: the new prompt and output of each call in contextCallIds, in order]
 *   [its own new prompt]
 *
 * so a call that extends its predecessor's conversation repeats that call's whole
 * prompt as its prefix (what the engine's prefix cache can reuse). prompt.ts turns
 * this into tokens or chat messages.
 */

export interface CallSpec {
  /** Index of the call in its program's `calls` (unique within the program). */
  readonly callId: number;
  /** Thread label (x-agentix-thread): "main", or "branch-<k>" for parallel siblings. */
  readonly thread: string;
  /** Calls that must finish before this one is issued; every id is < callId. */
  readonly dependsOn: readonly number[];
  /** Tool or think time after the last of `dependsOn` finishes (0 for a program's first calls). */
  readonly gapBeforeMs: number;
  /** Tool calls whose results this call reads (gapBeforeMs is the slowest); 0 when none. */
  readonly toolCalls: number;
  /** Identity of the shared system prompt (equal ids = equal system prompt tokens). */
  readonly systemPromptId: string;
  readonly systemPromptTokens: number;
  /** Earlier calls whose new prompt and output, in this order, form the context. */
  readonly contextCallIds: readonly number[];
  /** Σ (newPromptTokens + outputTokens) over contextCallIds. */
  readonly contextTokens: number;
  readonly newPromptTokens: number;
  /**
   * The call whose new prompt this one repeats word for word (a tree search samples a
   * node's children from one prompt); absent: its own. That call comes first in the
   * program and has the same newPromptTokens.
   */
  readonly samePromptAs?: number;
  /** Tokens the call generates (pass as the engine's target output length). */
  readonly outputTokens: number;
}

export interface ProgramSpec {
  /** `prog_sim<index>`: matches the protocol's program-id shape. */
  readonly programId: string;
  /** Position in arrival order, from 0. */
  readonly index: number;
  readonly tenantId?: string;
  readonly kind: AgentKind;
  /** Index of the workload's mix entry that produced it. */
  readonly mixIndex: number;
  readonly arrivalMs: number;
  /** Seeds the program's rendered text (prompt.ts), so programs do not share content. */
  readonly contentSeed: number;
  /** In issue order: dependencies always come first. */
  readonly calls: readonly CallSpec[];
}

/** Prompt length of a call: system + context + new. */
export function promptTokenCount(call: CallSpec): number {
  return call.systemPromptTokens + call.contextTokens + call.newPromptTokens;
}

/** Tokens a call adds to the conversation (what a later call re-sends for it). */
export function turnTokens(call: CallSpec): number {
  return call.newPromptTokens + call.outputTokens;
}

export interface NewCall {
  thread: string;
  dependsOn: readonly number[];
  gapBeforeMs: number;
  toolCalls: number;
  contextCallIds: readonly number[];
  contextTokens: number;
  newPromptTokens: number;
  samePromptAs?: number;
  outputTokens: number;
}

/** Appends calls with consecutive ids and the program's system prompt. */
export class CallListBuilder {
  readonly calls: CallSpec[] = [];

  constructor(
    private readonly systemPromptId: string,
    private readonly systemPromptTokens: number,
  ) {}

  add(call: NewCall): CallSpec {
    const spec: CallSpec = {
      callId: this.calls.length,
      thread: call.thread,
      dependsOn: call.dependsOn,
      gapBeforeMs: call.gapBeforeMs,
      toolCalls: call.toolCalls,
      systemPromptId: this.systemPromptId,
      systemPromptTokens: this.systemPromptTokens,
      contextCallIds: call.contextCallIds,
      contextTokens: call.contextTokens,
      newPromptTokens: call.newPromptTokens,
      ...(call.samePromptAs === undefined ? {} : { samePromptAs: call.samePromptAs }),
      outputTokens: call.outputTokens,
    };
    const original = call.samePromptAs === undefined ? undefined : this.calls[call.samePromptAs];
    if (call.samePromptAs !== undefined && original?.newPromptTokens !== call.newPromptTokens) {
      throw new RangeError(`call ${spec.callId}: samePromptAs ${call.samePromptAs} must name an earlier call with the same newPromptTokens`);
    }
    this.calls.push(spec);
    return spec;
  }
}
