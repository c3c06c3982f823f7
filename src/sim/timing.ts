import type { EngineProfile } from "./profiles.js";

/*
 * Duration of one continuous-batching step (reference: "Engine timing"):
 *
 *   max(decode base, per-token rate × (T + B))      weights are read once per step
 *   + attention coefficient × Σ T_i·(s_i + T_i/2)   prefill attention, per chunk
 *   + per-context rate × ΣC                          KV read of every sequence
 *   + per-sequence cost × B
 *
 * B = sequences in the step, T = prompt tokens prefilled in it (recompute included),
 * s_i = tokens already in the KV cache ahead of chunk i, ΣC = context of every
 * sequence after the step. A decode contributes 1 to B and its context to ΣC.
 */

/** The shape of one step; reused across steps to keep the hot loop allocation-free. */
export class StepShape {
  sequences = 0;
  prefillTokens = 0;
  contextTokens = 0;
  attentionPairs = 0;

  reset(): void {
    this.sequences = 0;
    this.prefillTokens = 0;
    this.contextTokens = 0;
    this.attentionPairs = 0;
  }

  /** A sequence producing its next token from `context` tokens (the new one included). */
  addDecode(context: number): void {
    this.sequences += 1;
    this.contextTokens += context;
  }

  /** A prefill chunk of `newTokens` after `ahead` tokens already in the KV cache. */
  addPrefill(ahead: number, newTokens: number): void {
    this.sequences += 1;
    this.prefillTokens += newTokens;
    this.contextTokens += ahead + newTokens;
    this.attentionPairs += newTokens * (ahead + newTokens / 2);
  }
}

export function stepDurationMs(profile: EngineProfile, shape: StepShape): number {
  if (shape.sequences === 0) return 0;
  const linear = profile.perTokenMs * (shape.prefillTokens + shape.sequences);
  return (
    Math.max(profile.decodeBaseMs, linear) +
    profile.attentionMsPerTokenPair * shape.attentionPairs +
    profile.perContextTokenMs * shape.contextTokens +
    profile.perSequenceMs * shape.sequences
  );
}
