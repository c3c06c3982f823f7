import { createApp } from "./app.js";
import type { Env } from "./env.js";
import { countedRequestEnv, countingIo, IO_TOTALS_PATH, isolateD1Queries, isolateHandOffs } from "./instrument/io-counts.js";

/*
 * The Agentix edge Worker: tenant auth, programs, metering, and signed
 * forwarding to the GPU pool. Durable Object classes are exported here so
 * wrangler can bind them.
 */
export { UsageLedger } from "./ledger/usage-ledger.js";
export { TenantLimiter } from "./limiter/tenant-limiter.js";
export { PoolMonitor } from "./pools/monitor.js";
export { ProgramIndex } from "./recognition/program-index.js";
export { ProgramSession } from "./program/session.js";

const app = createApp();
export default {
  // bench:edge counts each request's Durable Object calls and D1 queries (COUNT_IO=1); otherwise env is as given.
  fetch: (request: Request, env: Env, ctx: ExecutionContext) => {
    // The isolate's D1 totals and ledger hand-offs, for bench:edge only: outside the app, so no route exists without COUNT_IO.
    if (countingIo(env) && new URL(request.url).pathname === IO_TOTALS_PATH) {
      return Response.json({ ...isolateD1Queries, handOffs: isolateHandOffs.count });
    }
    return app.fetch(request, countedRequestEnv(env), ctx);
  },
} satisfies ExportedHandler<Env>;
