import { parsePoolConfig } from "../../pool/config.js";
import { startPool } from "../../pool/server.js";
import { startSimEngine } from "../../sim/engine-server.js";
import { startLocalStack } from "../local-stack.js";
import { startMinimalNodeProxy } from "./proxy-node-baseline.js";
import { startTokenSource } from "./relay-token-source.js";
import { type ChildMessage, ServerSpec, STOP_MESSAGE } from "./proxy-server-spec.js";

/*
 * A benchmark server in its own process (started by proxy-server-process.ts), so
 * the load generator's event loop never delays the servers it measures. It stops
 * cleanly on the parent's "stop" message, on SIGINT/SIGTERM (Ctrl-C reaches the
 * whole process group) and when the parent goes away (IPC disconnect).
 */

interface Running {
  ready: Record<string, string>;
  close(): Promise<void>;
}

async function start(spec: ServerSpec): Promise<Running> {
  switch (spec.role) {
    case "engine": {
      // Infinity: engine steps take no real time, so only HTTP and relay costs remain.
      const engine = await startSimEngine({ timeScale: Infinity });
      return { ready: { url: engine.url, model: engine.modelName }, close: () => engine.close() };
    }
    case "relay-source": {
      const source = await startTokenSource({ intervalMs: spec.intervalMs });
      return { ready: { url: source.url, model: source.model }, close: () => source.close() };
    }
    case "pool": {
      const pool = await startPool(
        parsePoolConfig({
          port: 0,
          signingKeys: [spec.signingKey],
          timestampWindowMs: spec.timestampWindowMs,
          replayCapacity: spec.replayCapacity,
          engines: [
            {
              id: "sim-1",
              url: spec.engineUrl,
              kind: spec.engineKind ?? "vllm",
              maxInFlight: spec.engineInFlight,
              ...(spec.engineKvCapacityTokens === undefined ? {} : { kvCapacityTokens: spec.engineKvCapacityTokens }),
            },
          ],
        }),
      );
      return { ready: { url: pool.url }, close: () => pool.close() };
    }
    case "node-proxy": {
      const proxy = await startMinimalNodeProxy(spec.engineUrl);
      return { ready: { url: proxy.url }, close: () => proxy.close() };
    }
    case "edge-stack": {
      const stack = await startLocalStack({
        root: spec.root,
        stateDir: spec.stateDir,
        edgePort: spec.edgePort,
        poolPort: 0,
        pools: 1,
        engines: 1,
        timeScale: Infinity,
        engineMaxInFlight: spec.engineInFlight,
        log: (line) => console.error(`[edge-stack] ${line}`),
      });
      const engineUrl = stack.engineUrls[0];
      if (engineUrl === undefined) throw new Error("local stack started no engine");
      return {
        ready: {
          edgeUrl: stack.edgeUrl,
          poolUrl: stack.poolUrl,
          engineUrl,
          model: stack.model,
          adminToken: stack.adminToken,
          tenantId: stack.tenantId,
          devKey: stack.devKey,
        },
        close: () => stack.stop(),
      };
    }
  }
}

function send(message: ChildMessage): void {
  process.send?.(message);
}

async function main(): Promise<void> {
  const spec = ServerSpec.parse(JSON.parse(process.argv[2] ?? "null"));
  let running: Running | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (code: number) => {
    stopping ??= (async () => {
      try {
        await running?.close();
      } catch (error) {
        console.error(`[${spec.role}] close failed: ${error instanceof Error ? error.message : String(error)}`);
        code = 1;
      }
      process.exit(code);
    })();
  };
  process.on("message", (message) => {
    if (message === STOP_MESSAGE) stop(0);
  });
  process.on("disconnect", () => stop(0));
  process.on("SIGINT", () => stop(130));
  process.on("SIGTERM", () => stop(143));

  try {
    running = await start(spec);
  } catch (error) {
    send({ type: "failed", message: error instanceof Error ? error.message : String(error) });
    stop(1);
    return;
  }
  // A stop asked for while starting has already exited the process (wrangler's
  // process group goes with it: wrangler-process.ts kills it on exit).
  send({ type: "ready", ready: running.ready });
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.stack : error);
  process.exit(1);
});
