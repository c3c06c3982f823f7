/*
 * The oracle's knowledge: how much engine time a program still needs. A call's work
 * is its standalone time by the engine's step formula (core/admission.ts
 * standaloneCallMs, equal to sim/timing.ts's stepDurationMs for one prefill step and
 * the decode steps after it): the same measure the pool charges as a call's service.
 * It is a ranking key, not a prediction: batching and caching change real times.
 */

import { standaloneCallMs } from "../../core/admission.js";
import { decodeCostOf, type EngineProfile } from "../profiles.js";
import type { CallSpec, ProgramSpec } from "../workload/program-spec.js";

/** The core's standalone time of the call (the pool's "work" service), its context cached. */
export function callWorkMs(profile: EngineProfile, call: CallSpec): number {
  const ahead = call.systemPromptTokens + call.contextTokens;
  return standaloneCallMs(decodeCostOf(profile), { promptTokens: ahead + call.newPromptTokens, cachedTokens: ahead, completionTokens: call.outputTokens });
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
