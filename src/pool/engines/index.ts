import type { EngineAdapter, EngineKind } from "./adapter.js";
import { openaiAdapter } from "./openai.js";
import { sglangAdapter } from "./sglang.js";
import { vllmAdapter } from "./vllm.js";

export * from "./adapter.js";
export { openaiAdapter, sglangAdapter, vllmAdapter };

const ADAPTERS: Record<EngineKind, EngineAdapter> = {
  vllm: vllmAdapter,
  sglang: sglangAdapter,
  openai: openaiAdapter,
};

export function adapterFor(kind: EngineKind): EngineAdapter {
  return ADAPTERS[kind];
}
