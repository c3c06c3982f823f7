import { labelValue } from "../prometheus-text.js";
import { buildUpstreamBody, type EngineAdapter, type QueuePosition } from "./adapter.js";

/** vLLM (`--scheduling-policy priority`): lower `priority` runs first, so the level itself. */
export const vllmAdapter: EngineAdapter = {
  kind: "vllm",
  priorityFor: ({ level }: QueuePosition) => level,
  metricNames: {
    waiting: ["vllm:num_requests_waiting"],
    // vLLM V0 called the KV gauge gpu_cache_usage_perc.
    kvUsage: ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
  },
  split: "kv-transfer-params",
  // Started kv_both (as vLLM's NixlConnector examples and our README run it), its KV connector acts on each request's kv_transfer_params: either side, at once.
  roleSwitch: "overlap",
  continuousUsage: true,
  healthPath: "/health",
  metricsPath: "/metrics",
  // vLLM states its cache layout as labels of an info gauge: num_gpu_blocks × block_size, summed over ranks.
  kvCapacityTokens: (samples) => {
    let tokens = 0;
    for (const sample of samples) {
      if (sample.name !== "vllm:cache_config_info") continue;
      const blocks = Number(labelValue(sample, "num_gpu_blocks"));
      const blockSize = Number(labelValue(sample, "block_size"));
      if (Number.isFinite(blocks) && Number.isFinite(blockSize) && blocks > 0 && blockSize > 0) tokens += blocks * blockSize;
    }
    return tokens > 0 ? tokens : undefined;
  },
  buildBody: (clientBody, options) => buildUpstreamBody(vllmAdapter, clientBody, options),
};
