import { describe, expect, it } from "vitest";
import { ProgramPrompts } from "../../../src/sim/des/program-prompts.js";
import { promptBlockHashes } from "../../../src/sim/token-hash.js";
import { generatePrograms } from "../../../src/sim/workload/generate.js";
import { BUILTIN_WORKLOADS, loadWorkload } from "../../../src/sim/workload/load.js";
import { callPromptTokens } from "../../../src/sim/workload/prompt.js";
import { parseWorkload } from "../../../src/sim/workload/schema.js";

/** Index of the first difference, -1 when equal (vitest's deep equality is slow on 70k-token arrays). */
function firstDifference<T>(a: readonly T[], b: readonly T[]): number {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe("ProgramPrompts", () => {
  it.each(BUILTIN_WORKLOADS)("renders every call of %s programs exactly, and never changes an earlier prompt", async (name) => {
    const workload = await loadWorkload(name);
    const programs = generatePrograms(workload, { seed: 11, count: name === "chat" || name === "function-calling" ? 12 : 2 });
    for (const program of programs) {
      const prompts = new ProgramPrompts(program, 16);
      const rendered: { tokens: string[]; copy: string[] }[] = [];
      for (const call of program.calls) {
        const { tokens, blockHashes } = prompts.render(call.callId);
        expect(firstDifference(tokens, callPromptTokens(program, call))).toBe(-1);
        expect(firstDifference(blockHashes, promptBlockHashes(tokens, 16))).toBe(-1);
        rendered.push({ tokens, copy: tokens.slice() });
      }
      // An engine reads a submitted prompt up to its length at submission: appending later is allowed, changing it is not.
      for (const { tokens, copy } of rendered) expect(firstDifference(tokens.slice(0, copy.length), copy)).toBe(-1);
      // Nothing is kept once every call is rendered.
      expect(prompts.keptCount).toBe(0);
    }
  });

  it("renders a coding agent's prompts across compactions (the cached prefix breaks)", () => {
    const workload = parseWorkload({
      name: "compacting",
      arrival: { process: "batch" },
      programs: { count: 3 },
      mix: [{ kind: "coding-agent", params: { contextCapTokens: 9_000, firstPromptTokens: 2_000, callsPerProgram: 40 } }],
    });
    for (const program of generatePrograms(workload, { seed: 2 })) {
      const prompts = new ProgramPrompts(program, 16);
      let compactions = 0;
      for (const call of program.calls) {
        const previous = program.calls[call.callId - 1];
        if (previous !== undefined && call.contextTokens < previous.contextTokens) compactions++;
        const { tokens, blockHashes } = prompts.render(call.callId);
        expect(firstDifference(tokens, callPromptTokens(program, call))).toBe(-1);
        expect(firstDifference(blockHashes, promptBlockHashes(tokens, 16))).toBe(-1);
      }
      expect(compactions).toBeGreaterThan(0);
    }
  });

  it("renders calls out of order correctly (from scratch when the anchor is gone)", async () => {
    const [program] = generatePrograms(await loadWorkload("chat"), { seed: 5, count: 1 });
    if (program === undefined) throw new Error("no program");
    const prompts = new ProgramPrompts(program, 16);
    const last = program.calls.at(-1);
    if (last === undefined) throw new Error("no call");
    expect(prompts.render(last.callId).tokens).toEqual(callPromptTokens(program, last));
    expect(() => prompts.render(program.calls.length)).toThrow(/no call/);
  });
});
