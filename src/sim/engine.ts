/* The simulated engine's public surface: the pure model (for the discrete-event simulator) and the HTTP server. */
export * from "./engine-model.js";
export * from "./engine-server.js";
export type { FaultMode } from "./engine-faults.js";
export { naturalOutputTokens, outputText, outputTokenText } from "./output-text.js";
export * from "./profiles.js";
export type { FinishReason } from "./sequence.js";
export { StepShape, stepDurationMs } from "./timing.js";
export { promptBlockHashes } from "./token-hash.js";
