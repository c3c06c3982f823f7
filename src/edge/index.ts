import { createApp } from "./app.js";

/*
 * The Agentix edge Worker: tenant auth, programs, metering, and signed
 * forwarding to the GPU pool. Durable Object classes are exported here so
 * wrangler can bind them.
 */
export { TenantLimiter } from "./limiter/tenant-limiter.js";
export { PoolMonitor } from "./pools/monitor.js";
export { ProgramIndex } from "./recognition/program-index.js";
export { ProgramSession } from "./program/session.js";

const app = createApp();
export default app;
