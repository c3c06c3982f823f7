import { buildUpstreamBody, type EngineAdapter } from "./adapter.js";

/** Any OpenAI-compatible server: no priority field, no metrics; health is `/v1/models`. */
export const openaiAdapter: EngineAdapter = {
  kind: "openai",
  priorityFor: () => undefined,
  metricNames: { waiting: [], kvUsage: [] },
  split: undefined,
  // Never split (no role but mixed): nothing to switch.
  roleSwitch: "drain",
  continuousUsage: false,
  healthPath: "/v1/models",
  metricsPath: undefined,
  buildBody: (clientBody, options) => buildUpstreamBody(openaiAdapter, clientBody, options),
};
