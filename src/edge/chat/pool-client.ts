import type { ForwardFields } from "../../protocol/forward.js";
import { newKvHintBatchId, newStatusProbeId, newTokenCountId } from "../../protocol/ids.js";
import type { KvHintBatch } from "../../protocol/kv-hints.js";
import { CountTokensResponse, type CountTokensRequest } from "../../protocol/messages.js";
import { PoolStatus } from "../../protocol/pool-status.js";
import { POOL_PATHS, type PoolPath, type SigningKey, signedForwardHeaders } from "../../protocol/signing.js";
import type { ToolEventBatch } from "../../protocol/tool-events.js";

export interface PoolForward {
  /** The pool's base URL; the API path is appended, and only the API path is signed. */
  poolUrl: string;
  /** The call's API path at the pool (the client's API: chat completions, completions, …). */
  path: PoolPath;
  signingKey: SigningKey;
  fields: ForwardFields;
  /** The client's body, byte for byte: the signature covers its SHA-256. */
  body: Uint8Array<ArrayBuffer>;
  /** The client's abort signal, so a client that leaves stops the pool's work too. */
  signal: AbortSignal;
}

/**
 * A signed POST of `body` to the pool's API `path`. The signature covers the
 * method and that path, not the base path of `poolUrl` (a reverse proxy's prefix),
 * so the pool checks it against its route's own path.
 */
async function postSigned(
  forward: { poolUrl: string; signingKey: SigningKey; fields: ForwardFields },
  path: PoolPath,
  body: Uint8Array<ArrayBuffer> | string,
  signal: AbortSignal,
): Promise<Response> {
  const method = "POST";
  return fetch(`${forward.poolUrl}${path}`, {
    method,
    headers: await signedForwardHeaders(forward.signingKey, { method, path }, forward.fields, body),
    body,
    signal,
  });
}

/** Sends one call to the pool with its signed Agentix headers. Rejects if the pool cannot be reached. */
export async function forwardToPool(forward: PoolForward): Promise<Response> {
  return postSigned(forward, forward.path, forward.body, forward.signal);
}

/** A pool that does not answer a tool-event batch within this long is given up on (events are hints). */
export const TOOL_EVENTS_TIMEOUT_MS = 5_000;

export interface ToolEventsForward {
  poolUrl: string;
  signingKey: SigningKey;
  /** `call` carries the batch's unique ID (replay protection); the service figures are 0, engine "". */
  fields: ForwardFields;
  batch: ToolEventBatch;
}

/**
 * Sends one batch of tool events to the pool (`POST /v1/events`), signed exactly like
 * a call. Rejects when the pool cannot be reached or refuses the batch; the caller
 * logs that and moves on.
 */
export async function sendToolEventsToPool(forward: ToolEventsForward): Promise<void> {
  const body = JSON.stringify(forward.batch);
  const res = await postSigned(forward, POOL_PATHS.toolEvents, body, AbortSignal.timeout(TOOL_EVENTS_TIMEOUT_MS));
  const text = await res.text();
  if (!res.ok) throw new Error(`pool answered ${res.status} to tool events: ${text.slice(0, 200)}`);
}

/** A pool that does not answer a KV-hint batch within this long is given up on (hints). */
export const KV_HINTS_TIMEOUT_MS = 5_000;

/**
 * Sends one batch of KV hints about `programId` to a pool (`POST /v1/kv-hints`), signed
 * like a call (`call` the batch's unique ID). Rejects when the pool cannot be reached or
 * refuses the batch; the caller logs that and moves on.
 */
export async function sendKvHintsToPool(
  pool: { poolUrl: string; signingKey: SigningKey },
  target: { tenantId: string; programId: string },
  batch: KvHintBatch,
  now: number,
): Promise<void> {
  const fields: ForwardFields = { ...edgeRequestFields(target.tenantId, newKvHintBatchId(), now), program: target.programId };
  const res = await postSigned({ ...pool, fields }, POOL_PATHS.kvHints, JSON.stringify(batch), AbortSignal.timeout(KV_HINTS_TIMEOUT_MS));
  const text = await res.text();
  if (!res.ok) throw new Error(`pool answered ${res.status} to KV hints: ${text.slice(0, 200)}`);
}

/** The signed fields of an edge request that is not a program's call: program "edge", no service, a unique ID for the pool's replay check. */
function edgeRequestFields(tenant: string, requestId: string, now: number): ForwardFields {
  return { tenant, program: "edge", thread: "main", call: requestId, serviceMs: 0, pathMs: 0, waitMs: 0, engine: "", weight: 1, generation: 0, ts: now };
}

/** A pool that does not answer its status request within this long is taken as unreachable this round. */
export const POOL_STATUS_TIMEOUT_MS = 3_000;

/**
 * Reads a pool's load and health (`GET /v1/status`), signed like a call: the
 * fields name the edge's probe (tenant and program "edge", a unique probe ID for the
 * pool's replay check). Rejects when the pool cannot be reached, refuses, or answers
 * something that is not a status.
 */
export async function readPoolStatus(pool: { poolUrl: string; signingKey: SigningKey }, now: number): Promise<PoolStatus> {
  const method = "GET";
  const path = POOL_PATHS.status;
  const fields = edgeRequestFields("edge", newStatusProbeId(), now);
  const res = await fetch(`${pool.poolUrl}${path}`, {
    method,
    headers: await signedForwardHeaders(pool.signingKey, { method, path }, fields, ""),
    signal: AbortSignal.timeout(POOL_STATUS_TIMEOUT_MS),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`pool answered ${res.status} to its status request: ${text.slice(0, 200)}`);
  return PoolStatus.parse(JSON.parse(text));
}

/** A pool that has not counted a prompt within this long is given up on: the edge answers its estimate. */
export const TOKEN_COUNT_TIMEOUT_MS = 6_000;

/**
 * Asks a pool to count a Messages prompt with an engine's tokenizer
 * (`POST /v1/messages/count_tokens`), signed like a call: the fields name the tenant,
 * program "edge" (no program is involved) and a unique request ID for the pool's
 * replay check. Rejects when the pool cannot be reached, cannot count, or answers
 * something that is not a count.
 */
export async function countTokensAtPool(
  pool: { poolUrl: string; signingKey: SigningKey },
  tenantId: string,
  request: CountTokensRequest,
  now: number,
): Promise<number> {
  const fields = edgeRequestFields(tenantId, newTokenCountId(), now);
  const res = await postSigned({ ...pool, fields }, POOL_PATHS.countTokens, JSON.stringify(request), AbortSignal.timeout(TOKEN_COUNT_TIMEOUT_MS));
  const text = await res.text();
  if (!res.ok) throw new Error(`pool answered ${res.status} to count_tokens: ${text.slice(0, 200)}`);
  return CountTokensResponse.parse(JSON.parse(text)).input_tokens;
}
