import { unstable_startWorker } from "wrangler";
import { EDGE_DEV_SPEC_ENV, EdgeDevSpec } from "./edge-dev-spec.js";

/*
 * The edge Worker on wrangler's local dev server (local D1 and Durable Objects), in a
 * process of its own (local-stack.ts starts it). Started through wrangler's startWorker
 * API rather than the `wrangler dev` CLI for one option the CLI lacks: no DevTools
 * inspector. wrangler's inspector proxy enables the runtime's Network domain and posts
 * every event it gets (one per chunk of every subrequest body) to wrangler's Node
 * process over a new loopback connection, and posts each failed post again. A long
 * stream relayed from a pool made thousands of such connections a second, until workerd
 * ran out of file descriptors and the whole edge, /health included, stopped answering
 * (cloudflare/workers-sdk#14191; the proxy is the same in wrangler 4.125).
 */

const spec = EdgeDevSpec.parse(JSON.parse(process.env[EDGE_DEV_SPEC_ENV] ?? "null"));
const worker = await unstable_startWorker({
  config: spec.config,
  bindings: Object.fromEntries(Object.entries(spec.vars).map(([name, value]) => [name, { type: "plain_text", value }])),
  dev: {
    server: { hostname: spec.host, port: spec.port },
    persist: spec.persistDir,
    inspector: false,
    logLevel: spec.logLevel,
    watch: false,
    liveReload: false,
  },
});
const stop = (): void => {
  void worker.dispose().finally(() => process.exit(0));
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
await worker.ready;
