import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { chatBody, SECRET, signedCall, testConfig } from "./helpers.js";

let engine: FakeEngine;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startFakeEngine();
  pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }], maxBodyBytes: 64 * 1024 }));
});
afterAll(async () => {
  await pool.close();
  await engine.close();
});

const post = (headers: Record<string, string>, body: string) =>
  pool.app.request("/v1/chat/completions", { method: "POST", headers, body });

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  const body = OpenAIErrorBody.parse(await res.json());
  expect(body.error.code).toBe(code);
  return body;
}

describe("verification of forwarded calls", () => {
  it("accepts a validly signed call and relays it", async () => {
    const call = await signedCall();
    const res = await post(call.headers, call.body);
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.engine)).toBe("e1");
  });

  it("rejects an unsigned call", async () => {
    const call = await signedCall();
    const { [Header.signature]: _dropped, ...headers } = call.headers;
    const body = await expectError(await post(headers, call.body), 401, "missing_signature");
    expect(body.error.type).toBe("authentication_error");
  });

  it("rejects a call signed with another secret", async () => {
    const call = await signedCall({ secret: "someone-elses-secret-value" });
    await expectError(await post(call.headers, call.body), 401, "invalid_signature");
  });

  it("rejects a tampered body", async () => {
    const call = await signedCall();
    const tampered = JSON.stringify(chatBody({ max_tokens: 9999 }));
    await expectError(await post(call.headers, tampered), 401, "invalid_signature");
  });

  it("rejects a tampered priority header", async () => {
    const call = await signedCall({ fields: { serviceMs: 90_000 } });
    await expectError(await post({ ...call.headers, [Header.serviceMs]: "0" }, call.body), 401, "invalid_signature");
  });

  it("rejects a malformed signature", async () => {
    const call = await signedCall();
    await expectError(await post({ ...call.headers, [Header.signature]: "v1=zz" }, call.body), 401, "invalid_signature");
  });

  it("rejects a stale timestamp, past or future", async () => {
    const old = await signedCall({ fields: { ts: Date.now() - 31_000 } });
    await expectError(await post(old.headers, old.body), 401, "stale_timestamp");
    const future = await signedCall({ fields: { ts: Date.now() + 31_000 } });
    await expectError(await post(future.headers, future.body), 401, "stale_timestamp");
  });

  it("rejects a replayed call ID, even re-signed with a fresh timestamp", async () => {
    const call = await signedCall();
    expect((await post(call.headers, call.body)).status).toBe(200);
    await expectError(await post(call.headers, call.body), 401, "replayed_call");
    const again = await signedCall({ fields: { call: call.fields.call } });
    await expectError(await post(again.headers, again.body), 401, "replayed_call");
  });

  it("answers 400 for a signed body that is not JSON or not a chat request", async () => {
    const notJson = await signedCall({ body: "{nope" });
    await expectError(await post(notJson.headers, notJson.body), 400, "invalid_json");
    const noMessages = await signedCall({ body: { model: "m", messages: [] } });
    const body = await expectError(await post(noMessages.headers, noMessages.body), 400, "invalid_request");
    expect(body.error.param).toBe("messages");
  });

  it("counts rejections by reason and never reaches the engine with them", async () => {
    const before = engine.calls.length;
    const call = await signedCall({ secret: "another-wrong-secret!" });
    await post(call.headers, call.body);
    expect(engine.calls.length).toBe(before);
    const text = await (await pool.app.request("/metrics")).text();
    expect(text).toMatch(/agentix_pool_rejected_requests_total\{reason="invalid_signature"\} [1-9]/);
    expect(text).toMatch(/agentix_pool_rejected_requests_total\{reason="replayed_call"\} [1-9]/);
  });

  it("answers unknown routes 404 in OpenAI shape", async () => {
    await expectError(await pool.app.request("/v1/embeddings", { method: "POST" }), 404, "not_found");
  });

  it("answers an oversized body 413", async () => {
    const call = await signedCall({ body: chatBody({ messages: [{ role: "user", content: "x".repeat(65 * 1024) }] }) });
    await expectError(await post(call.headers, call.body), 413, "body_too_large");
  });
});
