import type { EngineProfileName } from "./profiles.js";

/*
 * What moving a context's KV costs (issue 13): from a prefill engine to a decode engine
 * (disaggregated serving), and between GPU memory and the node's host-memory tier.
 * Bytes per token from each model's config (Llama 3.1 config.json: 8B has 32 layers,
 * 70B 80; both 8 KV heads of dimension 128; bf16): 2 (K and V) × layers × 8 × 128 × 2
 * bytes = 128 KiB a token for 8B, 320 KiB for 70B. Link rates are the datasheets' per
 * direction, per GPU:
 * - GPU to GPU in one node, NVLink: H100 SXM 900 GB/s and A100 SXM 600 GB/s in total
 *   (NVIDIA H100 and A100 Tensor Core GPU datasheets), half of it each way: 450 and
 *   300 GB/s. Prefill and decode engines are taken to share a node (an NVLink domain),
 *   as Dynamo's and vLLM's single-node disaggregated examples run; across nodes a
 *   400 Gb/s InfiniBand NDR NIC carries 50 GB/s each way.
 * - GPU to host memory, PCIe: H100 SXM Gen5 ×16, 128 GB/s in total, 64 each way;
 *   A100 SXM Gen4 ×16, 64 in total, 32 each way.
 * A tensor-parallel engine's KV is split over its GPUs and each moves its share over
 * its own links at once, so the rates scale with the GPU count. No fixed per-transfer
 * latency is modelled (no source gives one); at these rates a 10k-token context
 * moves in 2.9 ms over NVLink and 20 ms over PCIe, against ~300 ms to prefill it again
 * on one H100 (29 µs a token).
 */

export interface KvLinkProfile {
  kvBytesPerToken: number;
  /** Prefill engine → decode engine, GB/s (10⁹ bytes) each way, all the engine's GPUs together. */
  engineLinkGBps: number;
  /** GPU ↔ host memory, GB/s each way, all the engine's GPUs together. */
  hostLinkGBps: number;
}

const KIB = 1024;

export const KV_LINKS: Readonly<Record<EngineProfileName, KvLinkProfile>> = Object.freeze({
  "llama-3.1-8b-h100": { kvBytesPerToken: 128 * KIB, engineLinkGBps: 450, hostLinkGBps: 64 },
  "llama-3.1-70b-h100-tp4": { kvBytesPerToken: 320 * KIB, engineLinkGBps: 4 * 450, hostLinkGBps: 4 * 64 },
  "llama-3.1-8b-a100": { kvBytesPerToken: 128 * KIB, engineLinkGBps: 300, hostLinkGBps: 32 },
});

export type KvPath = "engine" | "host";

/** Milliseconds to move `tokens` tokens of KV over `path` (at the link's full rate). */
export function kvTransferMs(link: KvLinkProfile, tokens: number, path: KvPath): number {
  const gbps = path === "engine" ? link.engineLinkGBps : link.hostLinkGBps;
  return (Math.max(0, tokens) * link.kvBytesPerToken) / (gbps * 1e9) * 1_000;
}
