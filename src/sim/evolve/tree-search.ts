import { deriveSeed, hashString, Rng } from "../workload/prng.js";
import type { EvolveProgram, TreeShape } from "./workload.js";

/*
 * Tree-search programs (issue 13, the abandoned-branch signal): each round forks
 * `forks` branches off the kept context, one thread each (`r<round>b<branch>`), every
 * branch a chain of calls extending its own context; when the round's last branch has
 * answered, the agent keeps one branch (chosen per program and round from the seed) and
 * abandons the others, and the next round forks off the kept branch's context (its
 * last prompt and answer). Call `index` is (round × forks + branch) × branchCalls + step.
 */

export interface TreeCall {
  round: number;
  branch: number;
  step: number;
  /** The thread the call belongs to (its x-agentix-thread). */
  thread: string;
}

/** The program's tree, or a RangeError when its shape has none or its call count disagrees. */
export function treeOf(program: EvolveProgram): TreeShape {
  const tree = program.shape.tree;
  if (tree === undefined) throw new RangeError(`${program.id} is not a tree search`);
  if (tree.rounds * tree.forks * tree.branchCalls !== program.shape.calls) {
    throw new RangeError(`${program.id}: calls must be rounds × forks × branchCalls (${tree.rounds * tree.forks * tree.branchCalls}), got ${program.shape.calls}`);
  }
  return tree;
}

export const threadOf = (round: number, branch: number) => `r${round}b${branch}`;

export function treeCallOf(tree: TreeShape, index: number): TreeCall {
  const step = index % tree.branchCalls;
  const forkIndex = Math.floor(index / tree.branchCalls);
  const branch = forkIndex % tree.forks;
  const round = Math.floor(forkIndex / tree.forks);
  return { round, branch, step, thread: threadOf(round, branch) };
}

export const treeCallIndex = (tree: TreeShape, round: number, branch: number, step: number) => (round * tree.forks + branch) * tree.branchCalls + step;

/** The branch kept after `round`: deterministic per program and round. */
export function keptBranchOf(program: EvolveProgram, round: number): number {
  const tree = treeOf(program);
  return Math.floor(new Rng(deriveSeed(hashString(program.id), round, 13)).nextOpen() * tree.forks) % tree.forks;
}

/** The answer of a call, as tokens of the context that follows it. */
export function answerTokensOf(program: EvolveProgram, index: number): string[] {
  const tokens: string[] = [];
  for (let i = 0; i < program.shape.outputTokens; i++) tokens.push(`${program.id}:a${index}:${i}`);
  return tokens;
}

/**
 * The prompt of tree call `index`: for a branch's first call, `parent` (the round's
 * shared context: the task, or the kept branch's last prompt and answer) and the
 * branch's own instruction; for a later call, `parent` is the branch's previous prompt,
 * extended by its answer and the tool's result.
 */
export function treePromptOf(program: EvolveProgram, index: number, parent: readonly string[] | undefined): string[] {
  const tree = treeOf(program);
  const { step } = treeCallOf(tree, index);
  const tokens = parent === undefined ? [] : [...parent];
  // The task, distinct from every call's own tokens (call 0's are p0).
  if (parent === undefined) for (let i = 0; i < program.shape.firstPromptTokens; i++) tokens.push(`${program.id}:task:${i}`);
  if (step > 0) tokens.push(...answerTokensOf(program, index - 1));
  for (let i = 0; i < program.shape.stepTokens; i++) tokens.push(`${program.id}:p${index}:${i}`);
  return tokens;
}
