import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import type { Hono } from "hono";
import { Agent } from "undici";
import { type Clock, systemClock } from "../core/clock.js";
import { createPoolApp } from "./app.js";
import { callListener } from "./call-listener.js";
import { callRoutes } from "./call-routes.js";
import type { PoolConfig } from "./config.js";
import { Dispatcher } from "./dispatcher.js";
import { EngineMonitor } from "./engine-monitor.js";
import { adapterFor } from "./engines/index.js";
import { PoolMetrics } from "./metrics.js";
import type { ForwardedEnv } from "./verify-forward.js";
import { RoleDemandMeter } from "../core/roles/role-demand-meter.js";
import { RoleControlLoop } from "./role-control.js";
import { roleSetupFor } from "./role-setup.js";

export interface PoolHandle {
  /** `http://host:port`, with the port actually bound. */
  url: string;
  port: number;
  config: PoolConfig;
  dispatcher: Dispatcher;
  monitor: EngineMonitor;
  metrics: PoolMetrics;
  /** The live role switches' loop (roles.controller); undefined when off. */
  roleControl: RoleControlLoop | undefined;
  /** The Hono app, for `app.request()` in tests (same state as the listening server). */
  app: Hono<ForwardedEnv>;
  /** Stops accepting, answers queued calls 503, aborts running ones, stops timers, closes sockets. */
  close(): Promise<void>;
}

export interface StartPoolOptions {
  clock?: Clock;
}

/*
 * How long the pool keeps an idle keep-alive connection from the edge open.
 *
 * Node's default is 5 s, and workerd's fetch() keeps idle connections pooled for
 * 5 s too (kj's HttpClientSettings.idleTimeout), without honouring the server's
 * `Keep-Alive: timeout=5` hint. Its expiry is enforced by a timer on a busy event
 * loop, so under load workerd reuses connections that have been idle for 5 s or
 * longer: the request then meets a socket Node is closing, workerd reports
 * "Network connection lost." and the edge answers 502 pool_unreachable, although
 * not one byte reached the pool's handler. Cloudflare in production reuses a
 * connection to an origin for up to 900 s idle ("Proxy Idle Timeout",
 * developers.cloudflare.com/fundamentals/reference/connection-limits), so the same
 * race exists behind a deployed edge. The fix is the usual one: the server must
 * outlast every client's idle reuse, so the client is always the side that closes
 * an idle connection. Idle sockets cost a few kB each; close() still ends them all.
 */
export const POOL_KEEP_ALIVE_TIMEOUT_MS = 905_000;

function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once("error", onError);
    server.once("listening", () => {
      server.off("error", onError);
      const address = server.address();
      if (address === null || typeof address === "string") reject(new Error("pool server has no TCP address"));
      else resolve(address);
    });
    server.listen(port, host);
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}

export async function startPool(config: PoolConfig, options: StartPoolOptions = {}): Promise<PoolHandle> {
  const clock = options.clock ?? systemClock;
  const metrics = new PoolMetrics();
  // One keep-alive connection pool to all engines; a generation may stream for minutes.
  const http = new Agent({
    keepAliveTimeout: 10_000,
    headersTimeout: config.upstreamTimeoutMs,
    bodyTimeout: config.upstreamTimeoutMs,
    connect: { timeout: 5_000 },
  });
  let monitor: EngineMonitor | undefined;
  const roles = roleSetupFor(config.roles, config.engines);
  const roleMeter = roles === undefined ? undefined : new RoleDemandMeter(roles.model, clock.now());
  const dispatcher = new Dispatcher({
    engines: config.engines,
    settings: config.scheduling,
    clock,
    metrics,
    http,
    retries: config.retries,
    maxQueuedCalls: config.maxQueuedCalls,
    noHealthyEngineGraceMs: config.noHealthyEngineGraceMs,
    retryAfterSeconds: config.retryAfterSeconds,
    onEngineDown: (engineId) => monitor?.markDown(engineId),
    placement: config.placement,
    models: config.models,
    roleMeter,
  });
  const roleControl =
    roles === undefined || roleMeter === undefined
      ? undefined
      : new RoleControlLoop({
          controller: roles.controller,
          meter: roleMeter,
          target: dispatcher,
          clock,
          roundMs: config.roles.roundMs,
          onRound: ({ decision, started }) => {
            if (decision.action !== "switch") return;
            for (const refused of decision.switches.filter((s) => !started.includes(s))) {
              console.warn(`agentix pool: role controller asked ${refused.engineId} ${refused.from} -> ${refused.to}; it cannot switch now`);
            }
          },
        });
  monitor = new EngineMonitor({
    engines: config.engines.map((engine) => ({ ...engine, adapter: adapterFor(engine.kind) })),
    http,
    intervalMs: config.metricsIntervalMs,
    saturated: { settings: config.scheduling.saturation, intervalMs: config.saturatedMetricsIntervalMs },
    probeTimeoutMs: config.probeTimeoutMs,
    unhealthyAfterFailures: config.unhealthyAfterFailures,
    onReadings: (readings) => dispatcher.updateEngines(readings),
  });
  // Know the engines before the first call arrives.
  await monitor.refresh();
  monitor.start();
  roleControl?.start();

  const calls = callRoutes({ config, metrics, clock });
  const app = createPoolApp({ config, dispatcher, metrics, clock, calls });
  // Calls are served from Node's request and response (call-listener.ts); everything else by Hono through @hono/node-server.
  const server = createServer(
    // Node ≥ 18 checks headersTimeout / requestTimeout only while a request is being
    // received, so an idle keep-alive socket is bounded by this alone.
    { keepAliveTimeout: POOL_KEEP_ALIVE_TIMEOUT_MS },
    callListener({ calls, dispatcher, hostname: config.host }, getRequestListener(app.fetch, { hostname: config.host })),
  );
  let address: AddressInfo;
  try {
    address = await listen(server, config.port, config.host);
  } catch (error) {
    roleControl?.stop();
    await monitor.stop();
    await dispatcher.close(0);
    await http.destroy();
    throw error;
  }

  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  let closing: Promise<void> | undefined;
  const activeMonitor = monitor;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    config,
    dispatcher,
    monitor: activeMonitor,
    metrics,
    roleControl,
    app,
    close: () => {
      closing ??= (async () => {
        roleControl?.stop();
        const serverClosed = closeServer(server);
        await activeMonitor.stop();
        await dispatcher.close();
        if ("closeIdleConnections" in server) server.closeIdleConnections();
        // Responses just answered 503 get a moment to flush; then every socket goes.
        await Promise.race([serverClosed, new Promise((resolve) => setTimeout(resolve, 200).unref())]);
        if ("closeAllConnections" in server) server.closeAllConnections();
        await serverClosed;
        await http.destroy();
      })();
      return closing;
    },
  };
}
