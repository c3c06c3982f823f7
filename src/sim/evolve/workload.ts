import { deriveSeed, Rng } from "../workload/prng.js";

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

export interface AgentShape {
  /** The program's first prompt (system prompt and task), tokens. */
  firstPromptTokens: number;
  /** New tokens each later call appends (the tool result: a screenshot, a file, a check). */
  stepTokens: number;
  outputTokens: number;
  calls: number;
  /** The client's time between an answer and its next call (the tool), ms. */
  toolMs: number;
}

export const AGENT_SHAPES = {
  math: { firstPromptTokens: 400, stepTokens: 150, outputTokens: 1_500, calls: 3, toolMs: 500 },
  "computer-use": { firstPromptTokens: 1_500, stepTokens: 2_500, outputTokens: 60, calls: 8, toolMs: 1_000 },
  coding: { firstPromptTokens: 24_000, stepTokens: 1_200, outputTokens: 250, calls: 6, toolMs: 2_000 },
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

/** The prompt of a program's call `index`, as engine tokens: the program's context so far, extended (calls share its prefix). */
export function promptOf(program: EvolveProgram, index: number, previous: readonly string[] | undefined): string[] {
  const add = index === 0 ? program.shape.firstPromptTokens : program.shape.stepTokens;
  const tokens = previous === undefined ? [] : [...previous];
  // The previous answer is part of the context too.
  if (index > 0) for (let i = 0; i < program.shape.outputTokens; i++) tokens.push(`${program.id}:a${index}:${i}`);
  for (let i = 0; i < add; i++) tokens.push(`${program.id}:p${index}:${i}`);
  return tokens;
}
