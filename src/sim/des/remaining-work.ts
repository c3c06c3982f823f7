/*
 * The oracle's knowledge: how much engine time a program still needs. A call's work
 * is what the engine's own timing formula (stepDurationMs) gives for it running
 * alone: one prefill step of its new prompt after its context, then one decode step
 * per further output token. Decode cost is linear in the context, so the
 * output - 1 decode steps cost exactly (output - 1) steps at the mean context.
 * It is a ranking key, not a prediction: batching and caching change real times.
 */

import type { EngineProfile } from "../profiles.js";
import { StepShape, stepDurationMs } from "../timing.js";
import type { CallSpec, ProgramSpec } from "../workload/program-spec.js";

const shape = new StepShape();

export function callWorkMs(profile: EngineProfile, call: CallSpec): number {
  const ahead = call.systemPromptTokens + call.contextTokens;
  const prompt = ahead + call.newPromptTokens;
  shape.reset();
  shape.addPrefill(ahead, call.newPromptTokens);
  const prefill = stepDurationMs(profile, shape);
  const decodes = call.outputTokens - 1;
  if (decodes <= 0) return prefill;
  shape.reset();
  shape.addDecode(prompt + call.outputTokens / 2);
  return prefill + decodes * stepDurationMs(profile, shape);
}

/** Work of every call of the program, by call id. */
export function programWorkMs(profile: EngineProfile, program: ProgramSpec): Float64Array {
  const work = new Float64Array(program.calls.length);
  program.calls.forEach((call, i) => {
    work[i] = callWorkMs(profile, call);
  });
  return work;
}

/**
 * How long the program would take running alone: the critical path of its calls'
 * work (as above: batch 1, context cached) and the tool gaps before them. The
 * steady-state benchmark's baseline for the backlog (steady-state.ts).
 */
export function unloadedDurationMs(profile: EngineProfile, program: ProgramSpec): number {
  const work = programWorkMs(profile, program);
  const finish = new Float64Array(program.calls.length);
  let longest = 0;
  for (const call of program.calls) {
    let ready = 0;
    for (const dep of call.dependsOn) ready = Math.max(ready, finish[dep] ?? 0);
    const end = ready + call.gapBeforeMs + (work[call.callId] ?? 0);
    finish[call.callId] = end;
    longest = Math.max(longest, end);
  }
  return longest;
}
