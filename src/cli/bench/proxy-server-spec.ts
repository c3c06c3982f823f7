import { z } from "zod";
import { ENGINE_KINDS } from "../../pool/engines/index.js";
import { SigningKey } from "../../protocol/signing.js";
import { GC_TOTALS_REQUEST } from "./gc-meter.js";

/*
 * What a benchmark server process runs (passed as JSON in its argv) and what it
 * reports back over IPC once it listens. Shared by the parent and the child.
 */

export const EngineServerSpec = z.strictObject({ role: z.literal("engine") });

/** The relay benchmark's paced token source (relay-token-source.ts). */
export const RelaySourceServerSpec = z.strictObject({
  role: z.literal("relay-source"),
  intervalMs: z.number().positive().max(10_000),
});

export const PoolServerSpec = z.strictObject({
  role: z.literal("pool"),
  engineUrl: z.url(),
  signingKey: SigningKey,
  engineInFlight: z.int().positive(),
  timestampWindowMs: z.int().positive(),
  replayCapacity: z.int().positive(),
  /** The engine's kind in the pool's config (default vllm: the simulated engine). */
  engineKind: z.enum(ENGINE_KINDS).optional(),
  /** The engine's KV capacity for the pool's admission (default: its metrics', else the pool's default). */
  engineKvCapacityTokens: z.int().positive().optional(),
});

/** The minimal node:http proxy baseline (proxy-node-baseline.ts). */
export const NodeProxyServerSpec = z.strictObject({ role: z.literal("node-proxy"), engineUrl: z.url() });

export const EdgeStackServerSpec = z.strictObject({
  role: z.literal("edge-stack"),
  root: z.string().min(1),
  stateDir: z.string().min(1),
  edgePort: z.int().positive(),
  engineInFlight: z.int().positive(),
});

export const ServerSpec = z.discriminatedUnion("role", [
  EngineServerSpec,
  RelaySourceServerSpec,
  PoolServerSpec,
  NodeProxyServerSpec,
  EdgeStackServerSpec,
]);
export type ServerSpec = z.infer<typeof ServerSpec>;

export const EngineReady = z.strictObject({ url: z.string(), model: z.string() });
export type EngineReady = z.infer<typeof EngineReady>;

export const PoolReady = z.strictObject({ url: z.string() });
export type PoolReady = z.infer<typeof PoolReady>;

export const EdgeStackReady = z.strictObject({
  edgeUrl: z.string(),
  poolUrl: z.string(),
  engineUrl: z.string(),
  model: z.string(),
  adminToken: z.string(),
  tenantId: z.string(),
  devKey: z.string(),
});
export type EdgeStackReady = z.infer<typeof EdgeStackReady>;

export const ChildMessage = z.discriminatedUnion("type", [
  z.object({ type: z.literal("ready"), ready: z.record(z.string(), z.string()) }),
  z.object({ type: z.literal("failed"), message: z.string() }),
]);
export type ChildMessage = z.infer<typeof ChildMessage>;

/** Pause time (ms, on the main thread) and count per kind of collection since the process started (gc-meter.ts). */
const GcTotals = z.strictObject({
  /** Scavenges: young-generation collections. */
  minorMs: z.number(),
  minorCount: z.number(),
  /** Mark-compacts: full collections (their final pause; the incremental steps are apart). */
  majorMs: z.number(),
  majorCount: z.number(),
  /** Incremental marking steps of full collections. */
  incrementalMs: z.number(),
  /** Weak-callback processing. */
  weakMs: z.number(),
});
export type GcTotals = z.infer<typeof GcTotals>;

/** Child → parent: its GC totals, asked for with GC_TOTALS_REQUEST. */
export const GcTotalsReply = z.object({ type: z.literal(GC_TOTALS_REQUEST), totals: GcTotals });

/** Parent → child: shut down cleanly (so the edge stack's wrangler group goes too). */
export const STOP_MESSAGE = "stop";
