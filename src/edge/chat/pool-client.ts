import type { ForwardFields } from "../../protocol/forward.js";
import { forwardHeaders } from "../../protocol/forward.js";
import { Header } from "../../protocol/headers.js";
import { signForward } from "../../protocol/signing.js";

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
  const signature = await signForward(forward.signingSecret, forward.fields, forward.body);
  return fetch(`${forward.poolUrl}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...forwardHeaders(forward.fields),
      [Header.signature]: signature,
    },
    body: forward.body,
    signal: forward.signal,
  });
}
