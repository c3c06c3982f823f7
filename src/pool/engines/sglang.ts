import { valuesOf } from "../prometheus-text.js";
import { buildUpstreamBody, type EngineAdapter, type QueuePosition } from "./adapter.js";

/**
 * SGLang: with --enable-priority-scheduling, higher `priority` runs first (unless
 * --schedule-low-priority-values-first), so the level is inverted (level 0 → K−1).
 * Metric names as SGLang's SchedulerMetricsCollector defines them (--enable-metrics).
 */
export const sglangAdapter: EngineAdapter = {
  kind: "sglang",
  priorityFor: ({ level, levels }: QueuePosition) => Math.max(0, levels - 1 - level),
  metricNames: {
    waiting: ["sglang:num_queue_reqs"],
    kvUsage: ["sglang:token_usage"],
  },
  split: "bootstrap",
  // --disaggregation-mode picks the scheduler's event loop once, at start: the other side needs a restart, after a drain.
  roleSwitch: "drain",
  continuousUsage: true,
  healthPath: "/health",
  // Present only with --enable-metrics; a missing endpoint reads as zero load.
  metricsPath: "/metrics",
  kvCapacityTokens: (samples) => {
    const tokens = valuesOf(samples, ["sglang:max_total_num_tokens"]).reduce((sum, v) => sum + v, 0);
    return tokens > 0 ? tokens : undefined;
  },
  buildBody: (clientBody, options) => buildUpstreamBody(sglangAdapter, clientBody, options),
};
