import type { CallSpec, ProgramSpec } from "../../../src/sim/workload/program-spec.js";

/* Hand-built programs for the simulator's tests: no system prompt, no context, so nothing is shared in the prefix cache. */

export function callSpec(callId: number, overrides: Partial<CallSpec> = {}): CallSpec {
  return {
    callId,
    thread: "main",
    dependsOn: [],
    gapBeforeMs: 0,
    toolCalls: 0,
    systemPromptId: "none",
    systemPromptTokens: 0,
    contextCallIds: [],
    contextTokens: 0,
    newPromptTokens: 100,
    outputTokens: 10,
    ...overrides,
  };
}

export function programSpec(index: number, arrivalMs: number, calls: CallSpec[], overrides: Partial<ProgramSpec> = {}): ProgramSpec {
  return {
    programId: `prog_test${String(index).padStart(3, "0")}`,
    index,
    kind: "chat",
    mixIndex: 0,
    arrivalMs,
    contentSeed: 7_919 * (index + 1),
    calls,
    ...overrides,
  };
}

/*
 * The engine timing formula written out by hand with the llama-3.1-8b-h100 figures of
 * /work/shared/reference/workloads-and-engines.md (not by calling the model's code):
 *   step = max(7 ms, 29 µs · (T + B)) + 1.18 ns · Σ T·(s + T/2) + 0.076 µs · ΣC + 4.4 µs · B
 */
const DECODE_BASE_MS = 7;
const PER_TOKEN_MS = 0.029;
const ATTENTION_MS = 1.18e-6;
const PER_CONTEXT_MS = 0.076e-3;
const PER_SEQUENCE_MS = 4.4e-3;

export interface HandChunk {
  /** Prompt tokens already in the KV cache ahead of the chunk. */
  ahead: number;
  tokens: number;
}

/** One step with these prefill chunks and decodes (each decode given by its context, the new token included). */
export function handStep(prefills: HandChunk[], decodeContexts: number[]): number {
  const sequences = prefills.length + decodeContexts.length;
  const prefillTokens = prefills.reduce((sum, p) => sum + p.tokens, 0);
  const pairs = prefills.reduce((sum, p) => sum + p.tokens * (p.ahead + p.tokens / 2), 0);
  const context = prefills.reduce((sum, p) => sum + p.ahead + p.tokens, 0) + decodeContexts.reduce((sum, c) => sum + c, 0);
  return Math.max(DECODE_BASE_MS, PER_TOKEN_MS * (prefillTokens + sequences)) + ATTENTION_MS * pairs + PER_CONTEXT_MS * context + PER_SEQUENCE_MS * sequences;
}

/** A request alone on the engine from `start`: one prefill step, then output - 1 decode steps; returns its finish time. */
export function handAlone(start: number, promptTokens: number, outputTokens: number): number {
  let t = start + handStep([{ ahead: 0, tokens: promptTokens }], []);
  for (let j = 1; j < outputTokens; j++) t += handStep([], [promptTokens + j]);
  return t;
}
