import { expect } from "vitest";
import { PROGRAM_ID, THREAD_NAME } from "../../../src/protocol/ids.js";
import { type CallSpec, type ProgramSpec, promptTokenCount, turnTokens } from "../../../src/sim/workload/index.js";

/** Breaches of the call-graph contract the simulator relies on (collected: one expect per program keeps it fast). */
export function callGraphProblems(program: ProgramSpec, contextCap = Infinity): string[] {
  const problems: string[] = [];
  const fail = (call: CallSpec | undefined, what: string) => problems.push(`${program.programId} call ${call?.callId ?? "-"}: ${what}`);
  if (!PROGRAM_ID.test(program.programId)) fail(undefined, "bad program id");
  if (!(Number.isFinite(program.arrivalMs) && program.arrivalMs >= 0)) fail(undefined, "bad arrival");
  if (program.calls.length === 0) fail(undefined, "no calls");
  /** Transitive dependencies of each call. */
  const ancestors: Set<number>[] = [];
  program.calls.forEach((call, i) => {
    if (call.callId !== i) fail(call, `callId ${call.callId} at index ${i}`);
    if (!THREAD_NAME.test(call.thread)) fail(call, `bad thread ${call.thread}`);
    if (new Set(call.dependsOn).size !== call.dependsOn.length) fail(call, "repeated dependency");
    const mine = new Set<number>();
    for (const id of call.dependsOn) {
      // Only earlier calls: the graph is acyclic and issue order is a topological order.
      if (!(Number.isInteger(id) && id >= 0 && id < i)) fail(call, `depends on ${id}, not an earlier call`);
      mine.add(id);
      for (const a of ancestors[id] ?? []) mine.add(a);
    }
    ancestors.push(mine);
    if (call.dependsOn.length === 0 && call.gapBeforeMs !== 0) fail(call, "a first call with a gap");
    if (!(Number.isFinite(call.gapBeforeMs) && call.gapBeforeMs >= 0)) fail(call, `bad gap ${call.gapBeforeMs}`);
    // The context holds finished calls only (transitive dependencies), in order.
    let contextTokens = 0;
    let previous = -1;
    for (const id of call.contextCallIds) {
      if (!mine.has(id)) fail(call, `context call ${id} is not a dependency`);
      if (id <= previous) fail(call, "context out of order");
      previous = id;
      const earlier = program.calls[id];
      if (earlier !== undefined) contextTokens += turnTokens(earlier);
    }
    if (call.contextTokens !== contextTokens) fail(call, `contextTokens ${call.contextTokens} ≠ ${contextTokens}`);
    for (const n of [call.newPromptTokens, call.outputTokens]) if (!(Number.isInteger(n) && n >= 1)) fail(call, `bad token count ${n}`);
    if (!(Number.isInteger(call.systemPromptTokens) && call.systemPromptTokens >= 0)) fail(call, "bad system prompt size");
    if (promptTokenCount(call) > contextCap) fail(call, `prompt ${promptTokenCount(call)} over the cap ${contextCap}`);
  });
  return problems;
}

export function expectWellFormed(program: ProgramSpec, contextCap = Infinity): void {
  expect(callGraphProblems(program, contextCap)).toEqual([]);
}
