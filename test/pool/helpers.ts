import type { Agent } from "undici";
import { afterAll, beforeAll } from "vitest";
import { systemClock } from "../../src/core/clock.js";
import type { ForwardFields } from "../../src/protocol/forward.js";
import { POOL_PATHS, type PoolPath, type SigningKey, signedForwardHeaders } from "../../src/protocol/signing.js";
import { newCallId, newEventBatchId, newKvHintBatchId } from "../../src/protocol/ids.js";
import type { KvHint } from "../../src/protocol/kv-hints.js";
import type { ToolEventInput } from "../../src/protocol/tool-events.js";
import { AttemptAbort } from "../../src/pool/attempt-abort.js";
import { parsePoolConfig, type PoolConfig, type PoolConfigInput } from "../../src/pool/config.js";
import { adapterFor } from "../../src/pool/engines/index.js";
import type { RelayEnd, RelayRequest } from "../../src/pool/relay.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";

export const SECRET = "test-pool-signing-secret";
/** The key testConfig's pools hold, and signedCall signs with unless told otherwise. */
export const SIGNING_KEY: SigningKey = { id: "test-1", secret: SECRET };
/** The test pools' operator token (testConfig sets it): /metrics, /tao/* and /health's detail need it. */
export const OPERATOR_TOKEN = "test-pool-operator-token-0123456789abcdef";
export const operatorHeaders = (): Record<string, string> => ({ authorization: `Bearer ${OPERATOR_TOKEN}` });

export interface SignedCall {
  fields: ForwardFields;
  body: string;
  headers: Record<string, string>;
}

export const chatBody = (extra: Record<string, unknown> = {}) => ({
  model: "test-model",
  messages: [{ role: "user", content: "Say hello" }],
  ...extra,
});

export interface SignOptions {
  /** Default SIGNING_KEY. */
  key?: SigningKey;
  /** Shorthand: SIGNING_KEY's ID with this secret (a forger who guessed the ID). */
  secret?: string;
  /** The API path signed; default /v1/chat/completions. */
  path?: PoolPath;
}

/** A call as the edge would forward it, validly signed unless the test tampers with it. */
export async function signedCall(
  options: { fields?: Partial<ForwardFields>; body?: unknown } & SignOptions = {},
): Promise<SignedCall> {
  const fields: ForwardFields = {
    tenant: "ten_test",
    program: "prog_testprogram",
    thread: "main",
    call: newCallId(),
    serviceMs: 0,
    pathMs: 0,
    waitMs: 0,
    engine: "",
    weight: 1,
    generation: 0,
    ts: Date.now(),
    ...options.fields,
  };
  const body = typeof options.body === "string" ? options.body : JSON.stringify(options.body ?? chatBody());
  const key = options.key ?? (options.secret === undefined ? SIGNING_KEY : { id: SIGNING_KEY.id, secret: options.secret });
  const route = { method: "POST", path: options.path ?? POOL_PATHS.chatCompletions };
  return { fields, body, headers: await signedForwardHeaders(key, route, fields, body) };
}

/** A batch of tool events as the edge would forward it (`call` = the batch's ID), validly signed. */
export async function signedEvents(
  options: { fields?: Partial<ForwardFields>; events?: ToolEventInput[]; body?: string } & Omit<SignOptions, "path"> = {},
): Promise<SignedCall> {
  const { fields, events, body, ...sign } = options;
  return signedCall({
    ...sign,
    path: POOL_PATHS.toolEvents,
    fields: { call: newEventBatchId(), ...fields },
    body: body ?? JSON.stringify({ events: events ?? [{ type: "tool_started", tool: "bash", thread: "main" }] }),
  });
}

/** A batch of KV hints as the edge would send it (`call` = the batch's ID): by default the program ended. */
export async function signedKvHints(
  options: { fields?: Partial<ForwardFields>; hints?: KvHint[]; body?: string } & Omit<SignOptions, "path"> = {},
): Promise<SignedCall> {
  const { fields, hints, body, ...sign } = options;
  return signedCall({
    ...sign,
    path: POOL_PATHS.kvHints,
    fields: { call: newKvHintBatchId(), ...fields },
    body: body ?? JSON.stringify({ hints: hints ?? [{ type: "program_ended", reason: "ended" }] }),
  });
}

/** GET of a pool operator endpoint (/metrics, /tao/…, /health's detail) with the operator token, over the pool's socket. */
export const operatorGet = (poolUrl: string, path: string): Promise<Response> => fetch(`${poolUrl}${path}`, { headers: operatorHeaders() });

/** One Prometheus sample's value from the pool's /metrics text, or undefined when absent. */
export function metricValue(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

export function testConfig(input: Partial<PoolConfigInput> & Pick<PoolConfigInput, "engines">): PoolConfig {
  return parsePoolConfig({ port: 0, signingKeys: [SIGNING_KEY], operatorToken: OPERATOR_TOKEN, metricsIntervalMs: 50, ...input });
}

export async function waitFor(predicate: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * One simulated engine behind a pool that sends it at most `maxInFlight` calls, started
 * before the file's tests and closed after them. Read `pool` and `engine` inside tests.
 */
export function useSimEnginePool(options: { maxInFlight: number; timeScale: number }): { readonly pool: PoolHandle; readonly engine: SimEngineHandle } {
  let started: { pool: PoolHandle; engine: SimEngineHandle } | undefined;
  beforeAll(async () => {
    const engine = await startSimEngine({ engineId: "sim-1", timeScale: options.timeScale });
    const pool = await startPool(testConfig({ engines: [{ id: "sim-1", url: engine.url, maxInFlight: options.maxInFlight }] }));
    started = { pool, engine };
  });
  afterAll(async () => {
    await started?.pool.close();
    await started?.engine.close();
  });
  const get = () => {
    if (!started) throw new Error("the pool and engine have not started");
    return started;
  };
  return {
    get pool() {
      return get().pool;
    },
    get engine() {
      return get().engine;
    },
  };
}

/** A streamed chat call straight to relayToEngine (no pool around it), to a vLLM-kind engine "e1" at `engineUrl`. */
export function streamRelayRequest(engineUrl: string, http: Agent, callId: string, onEnd: (end: RelayEnd) => void): RelayRequest {
  return {
    engine: { id: "e1", url: engineUrl, adapter: adapterFor("vllm") },
    callId,
    api: "chat",
    path: "/v1/chat/completions",
    body: { model: "m", messages: [{ role: "user", content: "hi" }], stream: true },
    stream: true,
    queueMs: 0,
    dispatchedAt: systemClock.now(),
    signal: new AttemptAbort(),
    http,
    clock: systemClock,
    onEnd,
  };
}
