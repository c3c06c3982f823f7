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
  healthPath: "/health",
  metricsPath: "/metrics",
  buildBody: (clientBody, options) => buildUpstreamBody(vllmAdapter.priorityFor, clientBody, options),
};
