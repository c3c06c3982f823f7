import type { EngineAdapter, EngineKind } from "./adapter.js";
import { openaiAdapter } from "./openai.js";
import { sglangAdapter } from "./sglang.js";
import { vllmAdapter } from "./vllm.js";

export * from "./adapter.js";
export * from "./split.js";
export { openaiAdapter, sglangAdapter, vllmAdapter };

const ADAPTERS: Record<EngineKind, EngineAdapter> = {
  vllm: vllmAdapter,
  sglang: sglangAdapter,
  openai: openaiAdapter,
};

/** The kinds that split a call between a prefill and a decode engine (vLLM's KV connector, SGLang's PD mode). */
export const SPLIT_ENGINE_KINDS: readonly EngineKind[] = Object.freeze(["vllm", "sglang"]);

export function adapterFor(kind: EngineKind): EngineAdapter {
  return ADAPTERS[kind];
}
