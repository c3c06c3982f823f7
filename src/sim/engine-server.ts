import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { RealTimeEngineDriver } from "./engine-driver.js";
import { createSimEngineApp } from "./engine-app.js";
import { type FaultMode, FaultInjector } from "./engine-faults.js";
import { createEngineMetrics } from "./engine-metrics.js";
import { EngineModel } from "./engine-model.js";
import type { HostKvTier } from "./host-kv-tier.js";
import { NodeKvLedger } from "./node-kv-ledger.js";
import { isEngineProfileName, type EngineProfile, type EngineProfileName, resolveProfile } from "./profiles.js";
import { KvHandoffs } from "./kv-handoff.js";
import { KV_LINKS, kvTransferMs } from "./kv-links.js";

/*
 * One simulated vLLM engine on a real port: the pure EngineModel, stepped on the
 * wall clock (optionally sped up), behind vLLM's HTTP surface.
 */

export interface SimEngineOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Name for logs and the pool's engine list; default `sim-<port>`. */
  engineId?: string;
  /** Served model name; requests naming another model get 404 (as vLLM). */
  model?: string;
  profile?: EngineProfileName | EngineProfile;
  /** Model ms per real ms: 1 = real time, 10 = ten times faster, Infinity = steps take no real time. */
  timeScale?: number;
  /** Waiting order by `priority` (lower first) then arrival; else FCFS. Default true. */
  priorityScheduling?: boolean;
  maxNumSeqs?: number;
  maxBatchedTokens?: number;
  /** The node's host KV tier, shared by the engines given the same one (issue 13). Default: none. */
  hostTier?: HostKvTier;
  /** What the node computed, shared likewise (recomputed-token counts). Default: the engine's own. */
  nodeLedger?: NodeKvLedger;
  /**
   * Told when an HTTP request to a generation endpoint opens and when its response
   * closes (finished or dropped): lets tests count what truly reaches the engine.
   */
  requestObserver?: EngineRequestObserver;
  /** Model ms a remote-decode prefill's KV is held for a decode engine (kv-handoff.ts); default vLLM's 480 s. */
  kvHoldTimeoutMs?: number;
}

export interface EngineRequestObserver {
  opened(): void;
  closed(): void;
}

export interface SimEngineHandle {
  url: string;
  port: number;
  engineId: string;
  modelName: string;
  /** The live model, for inspection (stats(), numRunning, …). */
  model: EngineModel;
  /** The next `count` completion requests fail: "disconnect" (default) or "http-500". */
  failNext(count: number, mode?: FaultMode): void;
  close(): Promise<void>;
}

export const DEFAULT_SIM_MODEL = "sim-llama-3.1-8b";

/** Blocks an engine's own ledger remembers: 3.2M tokens of KV, a few MB of hashes. */
const ENGINE_LEDGER_ENTRIES = 200_000;

export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const host = options.host ?? "127.0.0.1";
  const modelName = options.model ?? DEFAULT_SIM_MODEL;
  const profile = resolveProfile(options.profile);
  // A disaggregated decode's pull takes the engine link's time (none for a profile without link figures).
  const link = isEngineProfileName(profile.name) ? KV_LINKS[profile.name] : undefined;
  const model = new EngineModel({
    profile,
    kvPullMs: (tokens) => (link === undefined ? 0 : kvTransferMs(link, tokens, "engine")),
    maxNumSeqs: options.maxNumSeqs,
    maxBatchedTokens: options.maxBatchedTokens,
    priorityScheduling: options.priorityScheduling,
    hostTier: options.hostTier,
    nodeLedger: options.nodeLedger ?? new NodeKvLedger(ENGINE_LEDGER_ENTRIES),
  });
  const metrics = createEngineMetrics(model, modelName);
  const driver = new RealTimeEngineDriver(model, {
    timeScale: options.timeScale ?? 1,
    onEvent: (event) => metrics.observe(event),
  });
  const faults = new FaultInjector();
  let address: { host: string; port: number } | undefined;
  const handoffs = new KvHandoffs({
    model,
    engineId: options.engineId,
    timeScale: driver.timeScale,
    address: () => address,
    registry: metrics.registry,
    ...(options.kvHoldTimeoutMs === undefined ? {} : { holdTimeoutMs: options.kvHoldTimeoutMs }),
  });
  const app = createSimEngineApp({ driver, metrics, faults, modelName, handoffs });

  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port: options.port ?? 0, hostname: host }, () => {
      s.off("error", reject);
      resolve(s as Server);
    });
    s.once("error", reject);
  });
  const observer = options.requestObserver;
  if (observer) {
    server.on("request", (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== "POST" || !req.url?.startsWith("/v1/")) return;
      observer.opened();
      res.once("close", () => observer.closed());
    });
  }
  const { port } = server.address() as AddressInfo;
  address = { host, port };
  const urlHost = host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | undefined;

  return {
    url: `http://${urlHost}:${port}`,
    port,
    engineId: options.engineId ?? `sim-${port}`,
    modelName,
    model,
    failNext: (count, mode) => faults.failNext(count, mode),
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        // Sockets first, so in-flight clients see a dropped connection, not a clean end.
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
        driver.close();
        handoffs.close();
      });
      return closing;
    },
  };
}
