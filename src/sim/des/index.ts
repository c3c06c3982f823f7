/* The discrete-event simulator: programs through the pool core onto modelled engines. */
export { EventQueue, type Scheduled } from "./event-queue.js";
export {
  ALL_POLICY_NAMES,
  isPolicyName,
  PLACEMENT_POLICY_NAMES,
  POLICIES,
  POLICY_NAMES,
  type PolicyDescription,
  type PolicyName,
  type PolicySetup,
  POOL_DEFAULT_MAX_IN_FLIGHT,
  policySetup,
} from "./policies.js";
export { ProgramPrompts, type RenderedCall } from "./program-prompts.js";
export { callWorkMs, programWorkMs } from "./remaining-work.js";
export {
  type CallRecord,
  DEFAULT_SIM_TENANT,
  type EngineRecord,
  type ProgramRecord,
  type SimulationConfig,
  type SimulationResult,
  simulate,
} from "./simulate.js";
export { taoPlacementSettings, TaoSimulation, type TaoSimulationOptions, type TaoRunStats, type TaoSkipReason } from "./tao-simulation.js";
export {
  DEFAULT_TOOL_EVENT_SETTINGS,
  sendsToolEvents,
  TOOL_NAMES,
  toolArguments,
  toolCallId,
  type ToolEventSettings,
  validateToolEventSettings,
} from "./tool-events.js";
