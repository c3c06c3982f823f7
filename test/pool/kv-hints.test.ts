import { afterEach, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { KvHintsAccepted } from "../../src/protocol/kv-hints.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { startFakeEngine } from "./fake-engine.js";
import { type SignedCall, signedEvents, signedKvHints, testConfig } from "./helpers.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(): Promise<PoolHandle> {
  const engine = await startFakeEngine();
  cleanups.push(() => engine.close());
  const pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }] }));
  cleanups.push(() => pool.close());
  return pool;
}

const postHints = (pool: PoolHandle, signed: SignedCall) => pool.app.request("/v1/kv-hints", { method: "POST", headers: signed.headers, body: signed.body });

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(OpenAIErrorBody.parse(await res.json()).error.code).toBe(code);
}

describe("POST /v1/kv-hints: verified exactly like calls and tool events", () => {
  it("accepts a signed program_ended batch", async () => {
    const pool = await setup();
    const res = await postHints(pool, await signedKvHints({ fields: { program: "prog_hints0001" } }));
    expect(res.status).toBe(202);
    expect(KvHintsAccepted.parse(await res.json())).toEqual({ accepted: 1 });
  });

  it("accepts a signed thread_ended batch, and refuses one that names no valid thread or outcome", async () => {
    const pool = await setup();
    const ended = { type: "thread_ended", thread: "branch-a", generation: 2, outcome: "merged" } as const;
    const res = await postHints(pool, await signedKvHints({ fields: { program: "prog_hints0002" }, hints: [ended] }));
    expect(res.status).toBe(202);
    expect(KvHintsAccepted.parse(await res.json())).toEqual({ accepted: 1 });
    const bad = (hint: object) => signedKvHints({ body: JSON.stringify({ hints: [hint] }) });
    await expectError(await postHints(pool, await bad({ ...ended, thread: "has space" })), 400, "invalid_request");
    await expectError(await postHints(pool, await bad({ ...ended, outcome: "paused" })), 400, "invalid_request");
    await expectError(await postHints(pool, await bad({ ...ended, generation: -1 })), 400, "invalid_request");
  });

  it("rejects unsigned, forged, replayed, cross-route and malformed batches", async () => {
    const pool = await setup();
    const signed = await signedKvHints();
    const { [Header.signature]: _dropped, ...unsigned } = signed.headers;
    await expectError(await postHints(pool, { ...signed, headers: unsigned }), 401, "missing_signature");
    await expectError(await postHints(pool, await signedKvHints({ secret: "someone-elses-secret-value" })), 401, "invalid_signature");
    // A tool-event batch's signature does not pass here, even with a KV-hint body.
    const events = await signedEvents();
    await expectError(await postHints(pool, { ...events, body: signed.body }), 401, "invalid_signature");
    expect((await postHints(pool, signed)).status).toBe(202);
    await expectError(await postHints(pool, signed), 401, "replayed_call");
    await expectError(await postHints(pool, await signedKvHints({ body: JSON.stringify({ hints: [{ type: "program_paused" }] }) })), 400, "invalid_request");
    await expectError(await postHints(pool, await signedKvHints({ body: JSON.stringify({ hints: [], pad: "x".repeat(70_000) }) })), 413, "body_too_large");
  });
});
