import type { AgentKind } from "./kinds.js";
import { type CallSpec, type ProgramSpec, promptTokenCount, turnTokens } from "./program-spec.js";

/*
 * Figures of generated programs in the reference table's terms, so tests and the
 * README can hold them against the published numbers.
 */

export interface Stats {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface ProgramsSummary {
  programs: number;
  calls: number;
  /** Programs per second over the arrival span; undefined when all arrive at once. */
  arrivalRatePerSec: number | undefined;
  callsPerProgram: Stats;
  newPromptTokens: Stats;
  outputTokens: Stats;
  contextTokens: Stats;
  /** system + context + new. */
  promptTokens: Stats;
  /** gapBeforeMs of calls that wait for others (a program's first calls excluded). */
  gapMs: Stats;
  /** Tool calls per step (a step: the calls waiting on the same calls); 1 for a plain turn. */
  fanOut: Stats;
  /** Each program's largest step. */
  maxFanOutPerProgram: Stats;
  /**
   * Token-weighted share of prompt tokens that repeat, as a prefix, an earlier
   * call's prompt and output in the same program: the prefix-cache hit rate of an
   * engine that never evicts and treats an output as tokens the next prompt can
   * match. `acrossPrograms` also counts a program's first system prompt as cached.
   */
  prefixReuse: { withinProgram: number; acrossPrograms: number };
}

export interface WorkloadSummary extends ProgramsSummary {
  byKind: Partial<Record<AgentKind, ProgramsSummary>>;
}

function quantile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  // Nearest rank.
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export function stats(values: readonly number[]): Stats {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    p99: quantile(sorted, 0.99),
    max: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] as number),
  };
}

/**
 * Longest prefix of `call`'s prompt found in an earlier call's sequence (its
 * context parent's or its predecessor's). Segments are keyed by call, so this
 * compares call-id lists instead of materialising segments: the earlier call's
 * sequence is system + its context + itself, the prompt is system + context + a
 * new segment no other call has.
 */
function reusedPrefixTokens(program: ProgramSpec, call: CallSpec): number {
  let best = 0;
  const parent = call.contextCallIds[call.contextCallIds.length - 1];
  for (const id of parent === call.callId - 1 ? [parent] : [parent, call.callId - 1]) {
    const earlier = id === undefined ? undefined : program.calls[id];
    if (earlier === undefined || earlier.systemPromptId !== call.systemPromptId) continue;
    let shared = call.systemPromptTokens;
    const mine = call.contextCallIds;
    const theirs = earlier.contextCallIds;
    for (let i = 0; i < mine.length; i++) {
      const other = i < theirs.length ? theirs[i] : i === theirs.length ? earlier.callId : undefined;
      if (other === undefined || other !== mine[i]) break;
      shared += turnTokens(program.calls[other] as CallSpec);
    }
    best = Math.max(best, shared);
  }
  return best;
}

function summarisePrograms(programs: readonly ProgramSpec[]): ProgramsSummary {
  const callsPerProgram: number[] = [];
  const newPrompt: number[] = [];
  const output: number[] = [];
  const context: number[] = [];
  const prompt: number[] = [];
  const gaps: number[] = [];
  const fanOut: number[] = [];
  const maxFanOut: number[] = [];
  let promptTotal = 0;
  let reusedWithin = 0;
  let firstSystemTokens = 0;
  let firstArrival = Infinity;
  let lastArrival = -Infinity;

  for (const program of programs) {
    firstArrival = Math.min(firstArrival, program.arrivalMs);
    lastArrival = Math.max(lastArrival, program.arrivalMs);
    callsPerProgram.push(program.calls.length);
    const steps = new Map<string, number>();
    for (const call of program.calls) {
      newPrompt.push(call.newPromptTokens);
      output.push(call.outputTokens);
      context.push(call.contextTokens);
      const length = promptTokenCount(call);
      prompt.push(length);
      promptTotal += length;
      const reused = reusedPrefixTokens(program, call);
      reusedWithin += reused;
      if (reused === 0) firstSystemTokens += call.systemPromptTokens;
      if (call.dependsOn.length > 0) {
        gaps.push(call.gapBeforeMs);
        const key = call.dependsOn.join(",");
        steps.set(key, (steps.get(key) ?? 0) + Math.max(1, call.toolCalls));
      }
    }
    let largest = 1;
    for (const width of steps.values()) {
      fanOut.push(width);
      largest = Math.max(largest, width);
    }
    maxFanOut.push(largest);
  }

  const span = lastArrival - firstArrival;
  return {
    programs: programs.length,
    calls: newPrompt.length,
    arrivalRatePerSec: programs.length > 1 && span > 0 ? ((programs.length - 1) / span) * 1_000 : undefined,
    callsPerProgram: stats(callsPerProgram),
    newPromptTokens: stats(newPrompt),
    outputTokens: stats(output),
    contextTokens: stats(context),
    promptTokens: stats(prompt),
    gapMs: stats(gaps),
    fanOut: stats(fanOut),
    maxFanOutPerProgram: stats(maxFanOut),
    prefixReuse: {
      withinProgram: promptTotal > 0 ? reusedWithin / promptTotal : 0,
      acrossPrograms: promptTotal > 0 ? (reusedWithin + firstSystemTokens) / promptTotal : 0,
    },
  };
}

/** Calls, tokens, gaps, fan-out and prefix reuse of generated programs, overall and per kind. */
export function summariseWorkload(programs: readonly ProgramSpec[]): WorkloadSummary {
  const byKind: Partial<Record<AgentKind, ProgramsSummary>> = {};
  const groups = new Map<AgentKind, ProgramSpec[]>();
  for (const program of programs) {
    const group = groups.get(program.kind);
    if (group === undefined) groups.set(program.kind, [program]);
    else group.push(program);
  }
  for (const [kind, group] of groups) byKind[kind] = summarisePrograms(group);
  return { ...summarisePrograms(programs), byKind };
}
