import { describe, expect, it } from "vitest";
import { type EvolveConfig, simulateEvolvingPool } from "../../src/sim/evolve/pd-simulation.js";
import { answerTokensOf, keptBranchOf, threadOf, treeCallIndex, treeCallOf, treeOf, treePromptOf } from "../../src/sim/evolve/tree-search.js";
import { AGENT_SHAPES, type EvolveProgram, shiftingWorkload } from "../../src/sim/evolve/workload.js";

/*
 * Issue 13, the abandoned-branch signal: tree-search programs fork branches, keep one and
 * abandon the rest; with threadEnded delivered at the decision the abandoned branches'
 * contexts are dropped on the engine (and evicted before LRU's victims), without it not.
 */

const profile = "llama-3.1-8b-h100" as const;
const shape = AGENT_SHAPES["tree-search"];
const { tree } = shape;

const startsWith = (tokens: readonly string[], prefix: readonly string[]) => prefix.every((token, i) => tokens[i] === token);

describe("the tree-search workload", () => {
  const phases = [{ kind: "tree-search" as const, durationMs: 120_000, programsPerSec: 0.1 }];

  it("is deterministic for a seed, and its call count is rounds × forks × branchCalls", () => {
    const programs = shiftingWorkload(phases, 5);
    expect(programs.length).toBeGreaterThan(3);
    expect(shiftingWorkload(phases, 5)).toEqual(programs);
    expect(shiftingWorkload(phases, 6)).not.toEqual(programs);
    for (const program of programs) expect(program.shape.calls).toBe(treeOf(program).rounds * tree.forks * tree.branchCalls);
    expect(programs.map((p) => keptBranchOf(p, 0))).toEqual(programs.map((p) => keptBranchOf(p, 0)));
    expect(programs.every((p) => [0, 1, 2].every((round) => keptBranchOf(p, round) >= 0 && keptBranchOf(p, round) < tree.forks))).toBe(true);
    // Not always the same branch: the choice depends on the program and the round.
    expect(new Set(programs.flatMap((p) => [0, 1, 2].map((round) => keptBranchOf(p, round)))).size).toBeGreaterThan(1);
  });

  it("forks each round's branches off the kept branch's context, and each branch extends only its own", () => {
    const program: EvolveProgram = { id: "tree-search-0", kind: "tree-search", phase: 0, arrivalMs: 0, shape };
    expect(() => treeOf({ ...program, shape: { ...shape, calls: 35 } })).toThrow(RangeError);
    const last = tree.branchCalls - 1;
    const branchPrompts = (round: number, parent: readonly string[] | undefined) =>
      Array.from({ length: tree.forks }, (_, b) => {
        let prompt = treePromptOf(program, treeCallIndex(tree, round, b, 0), parent);
        for (let step = 1; step <= last; step++) {
          const next = treePromptOf(program, treeCallIndex(tree, round, b, step), prompt);
          expect(startsWith(next, prompt)).toBe(true);
          prompt = next;
        }
        return prompt;
      });
    const round0 = branchPrompts(0, undefined);
    const task = round0[0]!.slice(0, shape.firstPromptTokens);
    expect(round0.every((p) => startsWith(p, task))).toBe(true);
    // Past the shared task the branches differ.
    expect(new Set(round0.map((p) => p[shape.firstPromptTokens])).size).toBe(tree.forks);
    const kept = keptBranchOf(program, 0);
    const roundContext = [...round0[kept]!, ...answerTokensOf(program, treeCallIndex(tree, 0, kept, last))];
    const round1 = branchPrompts(1, roundContext);
    expect(round1.every((p) => startsWith(p, roundContext))).toBe(true);
    // An abandoned branch's own tokens are in no later prompt.
    const abandoned = (kept + 1) % tree.forks;
    const own = round0[abandoned]![shape.firstPromptTokens]!;
    expect(round1.some((p) => p.includes(own))).toBe(false);
    expect(treeCallOf(tree, treeCallIndex(tree, 2, 3, 1))).toEqual({ round: 2, branch: 3, step: 1, thread: threadOf(2, 3) });
  });
});

describe("tree-search programs in the simulator", () => {
  // Light: the engine holds every context, nothing is evicted.
  const light: EvolveProgram[] = Array.from({ length: 3 }, (_, i) => ({ id: `tree-search-${i}`, kind: "tree-search", phase: 0, arrivalMs: i * 20_000, shape }));
  const run = (programs: readonly EvolveProgram[], settings: Pick<EvolveConfig, "retention" | "retentionHints" | "threadEndedSignal">) =>
    simulateEvolvingPool({ engines: 1, profile, programs, policy: { kind: "mixed" }, ...settings });

  it("runs every round's branches in parallel, forks the next round after the decision, and finishes every call", () => {
    const result = run(light, { retention: false });
    expect(result.programsFinished).toBe(light.length);
    expect(result.calls).toHaveLength(light.length * shape.calls);
    for (const program of light) {
      const calls = result.calls.filter((c) => c.programId === program.id);
      for (let round = 0; round < tree.rounds; round++) {
        const threads = Array.from({ length: tree.forks }, (_, b) => calls.filter((c) => c.threadId === threadOf(round, b)));
        expect(threads.map((t) => t.length)).toEqual(Array(tree.forks).fill(tree.branchCalls));
        // The branches' first calls start together: at arrival, or the decision after the previous round's last answer.
        const firsts = threads.map((t) => t[0]!.arrivalMs);
        expect(new Set(firsts).size).toBe(1);
        const previous = calls.filter((c) => c.threadId.startsWith(`r${round - 1}b`));
        const expectedStart = round === 0 ? program.arrivalMs : Math.max(...previous.map((c) => c.finishMs)) + tree.decisionMs;
        expect(firsts[0]).toBeCloseTo(expectedStart, 6);
      }
    }
  });

  it("with the signal, the abandoned branches' contexts are dropped at the decision; without it, not", () => {
    const withSignal = run(light, { retention: true, threadEndedSignal: true });
    const without = run(light, { retention: true, threadEndedSignal: false });
    // Every abandoned branch (rounds × (forks − 1) a program) is still on the engine: each drop applies.
    expect(withSignal.kv.branchDropsApplied).toBe(light.length * tree.rounds * (tree.forks - 1));
    expect(without.kv.branchDropsApplied).toBe(0);
    // Either way every context is dropped when its program ends; with the signal the abandoned ones went earlier.
    expect(withSignal.kv.dropsApplied).toBe(without.kv.dropsApplied);
    expect(withSignal.calls).toHaveLength(without.calls.length);
  });

  it("under KV pressure, the dropped branches' blocks are evicted in place of LRU's victims", () => {
    // Twelve programs 6 s apart on one engine: their live contexts outgrow its KV.
    const crowded: EvolveProgram[] = Array.from({ length: 12 }, (_, i) => ({ id: `tree-search-${i}`, kind: "tree-search", phase: 0, arrivalMs: i * 6_000, shape }));
    const withSignal = run(crowded, { retention: true, retentionHints: "drops", threadEndedSignal: true });
    const without = run(crowded, { retention: true, retentionHints: "drops", threadEndedSignal: false });
    expect(without.kv.evictedOrdinaryBlocks).toBeGreaterThan(1_000);
    expect(withSignal.kv.branchDropsApplied).toBeGreaterThan(0);
    expect(withSignal.kv.evictedDroppedBlocks).toBeGreaterThan(without.kv.evictedDroppedBlocks);
    expect(withSignal.kv.evictedOrdinaryBlocks).toBeLessThan(without.kv.evictedOrdinaryBlocks);
    expect(withSignal.programsFinished).toBe(crowded.length);
  });
});
