/*
 * Engine timing and capacity profiles for the simulated engine. Every figure comes
 * from /work/shared/reference/workloads-and-engines.md ("Engine timing (H100, bf16)"):
 * BLIS (inference-sim) for the decode terms and KV capacity, LLMServingSim's H100
 * profiles for the linear prefill rate, vLLM's defaults for the block size and
 * per-step limits. All times are milliseconds.
 */

export interface EngineProfile {
  readonly name: string;
  /** KV cache capacity in blocks of `blockSize` tokens. */
  readonly kvBlocks: number;
  readonly blockSize: number;
  /** Longest sequence (prompt + completion) a request may have; vLLM's max_model_len. */
  readonly maxModelLen: number;
  /** Weight-read floor of every step (the decode base). */
  readonly decodeBaseMs: number;
  /** Linear compute per token processed in a step (the prefill rate). */
  readonly perTokenMs: number;
  /** Prefill attention: coefficient of T·(s + T/2) per prefilled chunk. */
  readonly attentionMsPerTokenPair: number;
  /** KV read per token of context of every sequence in the step. */
  readonly perContextTokenMs: number;
  /** Fixed cost per sequence in the step. */
  readonly perSequenceMs: number;
  /** vLLM's max_num_batched_tokens and max_num_seqs defaults. */
  readonly maxBatchedTokens: number;
  readonly maxNumSeqs: number;
}

/*
 * Prefill attention per (new token, earlier token) pair. The reference notes give
 * 1.18 ps (8B) and 1.47 ps (70B, TP4); those must be nanoseconds: one pair costs
 * 4 · heads · head_dim · layers FLOPs (QKᵀ and AV, multiply-add), 4 · 32 · 128 · 32 =
 * 524k for Llama-3.1-8B, i.e. 1.18 ns at ~440 TFLOP/s, the same utilisation as the
 * linear term (29 µs per token ≈ 16 GFLOPs at ~550 TFLOP/s); 1.18 ps would need
 * ~440 PFLOP/s. For 70B on 4 GPUs (64 · 128 · 80 · 4 / 4 = 655k FLOPs per GPU) 1.47 ns
 * is again ~450 TFLOP/s. The error hid attention's quadratic cost on long contexts.
 */
const NANOSECOND_MS = 1e-6;
const MICROSECOND_MS = 1e-3;

/** Llama-3.1-8B on one H100: ~421k tokens of KV, 7 ms decode floor, ~34k prefill tokens/s. */
export const LLAMA_31_8B_H100: EngineProfile = {
  name: "llama-3.1-8b-h100",
  kvBlocks: 26_300,
  blockSize: 16,
  maxModelLen: 131_072,
  decodeBaseMs: 7,
  perTokenMs: 29 * MICROSECOND_MS,
  attentionMsPerTokenPair: 1.18 * NANOSECOND_MS,
  perContextTokenMs: 0.076 * MICROSECOND_MS,
  perSequenceMs: 4.4 * MICROSECOND_MS,
  maxBatchedTokens: 2_048,
  maxNumSeqs: 128,
};

/**
 * Llama-3.1-70B on 4×H100 (TP4): ~487k tokens of KV. The reference gives the decode
 * floor as 17–20 ms; the midpoint is used.
 */
export const LLAMA_31_70B_H100_TP4: EngineProfile = {
  name: "llama-3.1-70b-h100-tp4",
  kvBlocks: 30_500,
  blockSize: 16,
  maxModelLen: 131_072,
  decodeBaseMs: 18.5,
  perTokenMs: 86 * MICROSECOND_MS,
  attentionMsPerTokenPair: 1.47 * NANOSECOND_MS,
  perContextTokenMs: 0.048 * MICROSECOND_MS,
  perSequenceMs: 4.4 * MICROSECOND_MS,
  maxBatchedTokens: 2_048,
  maxNumSeqs: 128,
};

export const ENGINE_PROFILES = {
  "llama-3.1-8b-h100": LLAMA_31_8B_H100,
  "llama-3.1-70b-h100-tp4": LLAMA_31_70B_H100_TP4,
} as const satisfies Record<string, EngineProfile>;

export type EngineProfileName = keyof typeof ENGINE_PROFILES;

export const DEFAULT_PROFILE: EngineProfileName = "llama-3.1-8b-h100";

export function isEngineProfileName(name: string): name is EngineProfileName {
  return Object.hasOwn(ENGINE_PROFILES, name);
}

export function resolveProfile(profile: EngineProfileName | EngineProfile | undefined): EngineProfile {
  if (profile === undefined) return ENGINE_PROFILES[DEFAULT_PROFILE];
  if (typeof profile === "string") {
    if (!isEngineProfileName(profile)) throw new Error(`unknown engine profile "${String(profile)}"`);
    return ENGINE_PROFILES[profile];
  }
  return profile;
}
