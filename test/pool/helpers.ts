import { Header } from "../../src/protocol/headers.js";
import { type ForwardFields, forwardHeaders } from "../../src/protocol/forward.js";
import { signForward } from "../../src/protocol/signing.js";
import { newCallId } from "../../src/protocol/ids.js";
import { parsePoolConfig, type PoolConfig, type PoolConfigInput } from "../../src/pool/config.js";

export const SECRET = "test-pool-signing-secret";

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

/** A call as the edge would forward it, validly signed unless the test tampers with it. */
export async function signedCall(
  options: { fields?: Partial<ForwardFields>; body?: unknown; secret?: string } = {},
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
    ts: Date.now(),
    ...options.fields,
  };
  const body = typeof options.body === "string" ? options.body : JSON.stringify(options.body ?? chatBody());
  const signature = await signForward(options.secret ?? SECRET, fields, body);
  return {
    fields,
    body,
    headers: { "content-type": "application/json", ...forwardHeaders(fields), [Header.signature]: signature },
  };
}

export function testConfig(input: Partial<PoolConfigInput> & Pick<PoolConfigInput, "engines">): PoolConfig {
  return parsePoolConfig({ port: 0, signingSecret: SECRET, metricsIntervalMs: 50, ...input });
}

export async function waitFor(predicate: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
