export * from "./config.js";
export { Dispatcher, type CallSubmission, type DispatcherOptions, type EngineSnapshot, type ProgramInspection } from "./dispatcher.js";
export { EngineMonitor, type EngineReading, type MonitoredEngine } from "./engine-monitor.js";
export * from "./engines/index.js";
export { PoolMetrics } from "./metrics.js";
export { createPoolApp } from "./app.js";
export { startPool, type PoolHandle, type StartPoolOptions } from "./server.js";
export { PLACEMENT_POLICIES, type PlacementPolicy, type PlacementSettings, type PoolTaoSettings } from "./tao/config.js";
