import { deriveSeed, hashString, Rng } from "../workload/prng.js";

/*
 * The shifting agent mix of Evolving Infra's evaluation (issue 13), as sequential
 * agent programs whose every call extends the program's context: math agents decode
 * long answers from short prompts, computer-use agents read a new screenshot at every
 * step (prefill-heavy, short actions), coding agents re-read a long and growing
 * repository context (long prefixes the prefix cache can serve, little new each step).
 * Programs arrive as a Poisson process per phase; a step starts its tool gap after
 * the previous call's answer. The shapes are this benchmark's, chosen to make each
 * phase bind a different side; they are not measured traces.
 */

/**
 * The max_tokens every agent here sends: a generous cap above any answer it gives, as
 * agent clients send (the pool's admission then learns each program's output from its
 * answers), not the answer's own length, which no client knows in advance.
 */
export const CLIENT_MAX_TOKENS = 4_096;

export interface AgentShape {
  /** The program's first prompt (system prompt and task), tokens. */
  firstPromptTokens: number;
  /** New tokens each later call appends (the tool result: a screenshot, a file, a check). */
  stepTokens: number;
  /** Each answer's length (the engine stops there, as at EOS); at most CLIENT_MAX_TOKENS. */
  outputTokens: number;
  calls: number;
  /** The client's time between an answer and its next call (the tool), ms. */
  toolMs: number;
  /** Tool times vary: each is toolMs × a uniform factor in [1 − spread, 1 + spread] (default 0: fixed). */
  toolSpread?: number;
  /**
   * The agent compacts its history every this many calls: the next call's context is
   * the first prompt (system prompt and task, a prefix the old context shares) and a
   * summary, a new context generation that replaces the old one.
   */
  compactEvery?: number;
  /** Tokens of that summary. */
  summaryTokens?: number;
  /** A tree search (tree-search.ts): the program forks branches, keeps one, abandons the rest; `calls` is rounds × forks × branchCalls. */
  tree?: TreeShape;
}

/** A tree-search program's rounds: each forks `forks` branches off the kept context and keeps one of them. */
export interface TreeShape {
  forks: number;
  rounds: number;
  /** Calls each branch makes, one after another, tool waits between. */
  branchCalls: number;
  /** The agent's decision (scoring the branches) after a round's last call, before the next round forks (ms). */
  decisionMs: number;
}

export const AGENT_SHAPES = {
  math: { firstPromptTokens: 400, stepTokens: 150, outputTokens: 1_500, calls: 3, toolMs: 500 },
  "computer-use": { firstPromptTokens: 1_500, stepTokens: 2_500, outputTokens: 60, calls: 8, toolMs: 1_000 },
  coding: { firstPromptTokens: 24_000, stepTokens: 1_200, outputTokens: 250, calls: 6, toolMs: 2_000 },
  /**
   * A coding agent on a real repository: test runs and builds between calls (15 s ± 60 %),
   * its history compacted into a summary every 5 calls (as Claude Code and Codex
   * compact): live contexts outgrow the GPUs' KV, so what is evicted, and what is
   * reloaded or recomputed, matters (the host tier and retention variants).
   */
  "coding-long": { firstPromptTokens: 20_000, stepTokens: 1_500, outputTokens: 200, calls: 12, toolMs: 15_000, toolSpread: 0.6, compactEvery: 5, summaryTokens: 2_000 },
  /**
   * A tree-search agent (Tree-of-Thoughts, LATS-style): a 12k-token task forks 4
   * branches, each 3 calls with 10 s ± 50 % tool runs between; after 3 s of scoring (a test run, a value model) one
   * branch is kept, the other three abandoned, and the next round forks off the kept one.
   */
  "tree-search": {
    firstPromptTokens: 12_000,
    stepTokens: 2_000,
    outputTokens: 200,
    calls: 36,
    toolMs: 10_000,
    toolSpread: 0.5,
    tree: { forks: 4, rounds: 3, branchCalls: 3, decisionMs: 3_000 },
  },
} as const satisfies Record<string, AgentShape>;
export type AgentKind = keyof typeof AGENT_SHAPES;

export interface WorkloadPhase {
  kind: AgentKind;
  durationMs: number;
  programsPerSec: number;
}

export interface EvolveProgram {
  id: string;
  kind: AgentKind;
  phase: number;
  arrivalMs: number;
  shape: AgentShape;
}

/** Programs of each phase in arrival order; deterministic for a seed. */
export function shiftingWorkload(phases: readonly WorkloadPhase[], seed: number): EvolveProgram[] {
  const programs: EvolveProgram[] = [];
  let start = 0;
  phases.forEach((phase, index) => {
    const rng = new Rng(deriveSeed(seed, index));
    for (let at = start + (-Math.log(rng.nextOpen()) / phase.programsPerSec) * 1_000; at < start + phase.durationMs; at += (-Math.log(rng.nextOpen()) / phase.programsPerSec) * 1_000) {
      programs.push({ id: `${phase.kind}-${programs.length}`, kind: phase.kind, phase: index, arrivalMs: at, shape: AGENT_SHAPES[phase.kind] });
    }
    start += phase.durationMs;
  });
  return programs;
}

/** The context generation of call `index`: how many compactions came before it. */
export function generationOf(shape: AgentShape, index: number): number {
  return shape.compactEvery === undefined ? 0 : Math.floor(index / shape.compactEvery);
}

/** The tool time after call `index` (ms), deterministic per program and call. */
export function toolMsAfter(program: EvolveProgram, index: number): number {
  const spread = program.shape.toolSpread ?? 0;
  if (spread === 0) return program.shape.toolMs;
  const rng = new Rng(deriveSeed(hashString(program.id), index));
  return program.shape.toolMs * (1 - spread + 2 * spread * rng.nextOpen());
}

/** The prompt of a program's call `index`, as engine tokens: the program's context so far, extended (calls share its prefix); after a compaction, the first prompt and a summary. */
export function promptOf(program: EvolveProgram, index: number, previous: readonly string[] | undefined): string[] {
  const { shape } = program;
  if (index > 0 && generationOf(shape, index) !== generationOf(shape, index - 1)) {
    const tokens: string[] = [];
    for (let i = 0; i < shape.firstPromptTokens; i++) tokens.push(`${program.id}:p0:${i}`);
    for (let i = 0; i < (shape.summaryTokens ?? 0); i++) tokens.push(`${program.id}:s${index}:${i}`);
    return tokens;
  }
  const add = index === 0 ? program.shape.firstPromptTokens : program.shape.stepTokens;
  const tokens = previous === undefined ? [] : [...previous];
  // The previous answer is part of the context too.
  if (index > 0) for (let i = 0; i < program.shape.outputTokens; i++) tokens.push(`${program.id}:a${index}:${i}`);
  for (let i = 0; i < add; i++) tokens.push(`${program.id}:p${index}:${i}`);
  return tokens;
}
