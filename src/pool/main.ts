import { parseArgs } from "node:util";
import { loadPoolConfig, PoolConfigError } from "./config.js";
import { startPool } from "./server.js";

/*
 * `npm run pool -- --config pool.json` (node with the pool's flags, node-flags.ts):
 * runs one pool core until SIGINT or SIGTERM, then shuts down cleanly (a second
 * signal exits at once).
 */

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: "string", short: "c" } }, strict: true });
  const config = await loadPoolConfig({ path: values.config });
  const pool = await startPool(config);
  pool.metrics.includeProcessMetrics();
  console.log(`agentix pool listening on ${pool.url} with ${config.engines.length} engine(s): ${config.engines.map((e) => `${e.id}=${e.url}`).join(", ")}`);
  const passThrough = config.engines.filter((engine) => engine.model === undefined).map((engine) => engine.id);
  if (config.models === undefined && passThrough.length > 0) {
    console.warn(
      `agentix pool: no models list, and engine(s) ${passThrough.join(", ")} have no model: they get the model name tenants send (any model or LoRA adapter they serve); set models or engines[].model`,
    );
  }
  if (config.operatorToken === undefined) {
    console.warn("agentix pool: no operatorToken (or AGENTIX_POOL_OPERATOR_TOKEN): /metrics and /tao/* answer 403, /health only ok or degraded");
  }

  let stopping = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    console.log(`agentix pool: ${signal}, shutting down`);
    pool.close().then(
      () => process.exit(0),
      (error: unknown) => {
        console.error("agentix pool: shutdown failed", error);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}

main().catch((error: unknown) => {
  console.error(error instanceof PoolConfigError ? error.message : error);
  process.exit(1);
});
