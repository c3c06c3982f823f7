/*
 * Engine timing and capacity profiles for the simulated engine. The H100 figures come
 * from /work/shared/reference/workloads-and-engines.md ("Engine timing (H100, bf16)"):
 * BLIS (inference-sim) for the decode terms and KV capacity, LLMServingSim's H100
 * profiles for the linear prefill rate, vLLM's defaults for the block size and
 * per-step limits. The A100 profile scales them by published GPU peaks (below).
 * All times are milliseconds.
 */

import type { DecodeCostModel } from "../core/admission.js";

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

/*
 * Llama-3.1-8B on one A100-80GB SXM: Autellix's setting (its §1 calibration point and
 * single-engine experiments). No reference gives A100 step figures, so the H100 ones
 * above are scaled by the ratio of the two GPUs' published peaks, which keeps the
 * utilisation they imply:
 * - compute-bound terms (the prefill rate, prefill attention): bf16 dense tensor
 *   throughput, A100 312 TFLOPS (NVIDIA A100 Tensor Core GPU datasheet: "BFLOAT16
 *   Tensor Core 312 TFLOPS | 624 TFLOPS*", * with sparsity) against H100 SXM 989
 *   TFLOPS (NVIDIA H100 datasheet: 1,979 TFLOPS with sparsity, half dense): × 3.17,
 *   so 29 µs → 91.9 µs per token (~10.9k prefill tokens/s) and 1.18 → 3.74 ns per
 *   token pair;
 * - memory-bound terms (the decode floor, which reads the weights, and the KV read per
 *   context token): HBM bandwidth, A100 80GB SXM 2,039 GB/s (same datasheet; the
 *   80GB PCIe card has 1,935 GB/s) against H100 SXM 3.35 TB/s: × 1.64, so 7 → 11.5 ms
 *   and 0.076 → 0.125 µs per context token. Check: 8.03 B parameters × 2 bytes =
 *   16.06 GB of weights read in 11.5 ms is 1.40 TB/s, 69 % of the A100's peak (the
 *   H100 figure implies the same 69 %);
 * - the per-sequence cost (scheduling, sampling) is kept: ASSUMED not to scale;
 * - KV capacity: the same 80 GB card and model as the H100 row, so BLIS's 421k tokens
 *   (26.3k blocks of 16). From first principles: 80 GiB × 0.9 (vLLM's
 *   gpu_memory_utilization) = 77.3 GB, minus 16.06 GB of weights = 61.2 GB, which at
 *   128 KiB of KV per token (2 × 32 layers × 8 KV heads × 128 × 2 bytes) is 467k
 *   tokens before activations and CUDA graphs take their ~6 GB; BLIS's figure is kept.
 * Per-step limits are vLLM's defaults, as above.
 */
const A100_COMPUTE_FACTOR = 989 / 312;
const A100_BANDWIDTH_FACTOR = 3_350 / 2_039;

export const LLAMA_31_8B_A100: EngineProfile = {
  name: "llama-3.1-8b-a100",
  kvBlocks: 26_300,
  blockSize: 16,
  maxModelLen: 131_072,
  decodeBaseMs: 7 * A100_BANDWIDTH_FACTOR,
  perTokenMs: 29 * MICROSECOND_MS * A100_COMPUTE_FACTOR,
  attentionMsPerTokenPair: 1.18 * NANOSECOND_MS * A100_COMPUTE_FACTOR,
  perContextTokenMs: 0.076 * MICROSECOND_MS * A100_BANDWIDTH_FACTOR,
  perSequenceMs: 4.4 * MICROSECOND_MS,
  maxBatchedTokens: 2_048,
  maxNumSeqs: 128,
};

/** The cost terms of a profile: what the pool projects step time and a call's standalone time with. */
export function decodeCostOf(profile: EngineProfile): DecodeCostModel {
  const { decodeBaseMs, perTokenMs, perContextTokenMs, perSequenceMs, attentionMsPerTokenPair } = profile;
  return { decodeBaseMs, perTokenMs, perContextTokenMs, perSequenceMs, attentionMsPerTokenPair };
}

export const ENGINE_PROFILES = {
  "llama-3.1-8b-h100": LLAMA_31_8B_H100,
  "llama-3.1-70b-h100-tp4": LLAMA_31_70B_H100_TP4,
  "llama-3.1-8b-a100": LLAMA_31_8B_A100,
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
