/*
 * Agent workloads for the simulator and `agentix bench --workload`: the schema of a
 * workload file, the pure generator of programs, prompt rendering and summaries.
 * File loading (Node-only) lives in ./load.js.
 */
export { compileDistribution, Distribution, lognormalParameters, type Sampler } from "./distribution.js";
export { DEFAULT_SEED, type GenerateOptions, generatePrograms, programIdFor } from "./generate.js";
export {
  AGENT_KINDS,
  type AgentKind,
  ChatParams,
  CodingAgentParams,
  FAN_OUT_MODES,
  type FanOutMode,
  FunctionCallingParams,
  type KindParams,
  TreeSearchParams,
} from "./kinds.js";
export { Rng } from "./prng.js";
export { type CallSpec, type ProgramSpec, promptTokenCount, turnTokens } from "./program-spec.js";
export {
  appendSegmentTokens,
  callMessages,
  callPromptSegments,
  callPromptTokens,
  callSequenceSegments,
  commonPrefixTokens,
  type PromptSegment,
  type RenderedPrompt,
  renderPromptTokens,
  segmentToken,
  systemPromptSeed,
} from "./prompt.js";
export {
  ArrivalSpec,
  MAX_PROGRAMS,
  MixEntry,
  ProgramsSpec,
  parseWorkload,
  Workload,
  WorkloadError,
  type WorkloadIssue,
} from "./schema.js";
export { type ProgramsSummary, type Stats, stats, summariseWorkload, type WorkloadSummary } from "./summary.js";
