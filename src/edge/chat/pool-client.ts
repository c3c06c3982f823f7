import type { ForwardFields } from "../../protocol/forward.js";
import { signedForwardHeaders } from "../../protocol/signing.js";
import type { ToolEventBatch } from "../../protocol/tool-events.js";

export interface PoolForward {
  poolUrl: string;
  signingSecret: string;
  fields: ForwardFields;
  /** The client's body, byte for byte: the signature covers its SHA-256. */
  body: Uint8Array<ArrayBuffer>;
  /** The client's abort signal, so a client that leaves stops the pool's work too. */
  signal: AbortSignal;
}

/** Sends one call to the pool with its signed Agentix headers. Rejects if the pool cannot be reached. */
export async function forwardToPool(forward: PoolForward): Promise<Response> {
  return fetch(`${forward.poolUrl}/v1/chat/completions`, {
    method: "POST",
    headers: await signedForwardHeaders(forward.signingSecret, forward.fields, forward.body),
    body: forward.body,
    signal: forward.signal,
  });
}

/** A pool that does not answer a tool-event batch within this long is given up on (events are hints). */
export const TOOL_EVENTS_TIMEOUT_MS = 5_000;

export interface ToolEventsForward {
  poolUrl: string;
  signingSecret: string;
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
  const res = await fetch(`${forward.poolUrl}/v1/events`, {
    method: "POST",
    headers: await signedForwardHeaders(forward.signingSecret, forward.fields, body),
    body,
    signal: AbortSignal.timeout(TOOL_EVENTS_TIMEOUT_MS),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`pool answered ${res.status} to tool events: ${text.slice(0, 200)}`);
}
