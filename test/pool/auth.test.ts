import { type ClientRequest, request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { POOL_PATHS, type SigningKey, signedForwardHeaders } from "../../src/protocol/signing.js";
import { chatBody, metricValue, operatorHeaders, SIGNING_KEY, signedCall, signedEvents, testConfig } from "./helpers.js";

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

/*
 * A call reaches the pool's checks two ways: over its socket, served from Node's request
 * (call-listener.ts), and through Hono's routes (`app.request()`); each check is asserted
 * on both.
 */
const FRONTS = [
  ["app.request()", (headers: Record<string, string>, body: string) => pool.app.request("/v1/chat/completions", { method: "POST", headers, body })],
  ["the pool's socket", (headers: Record<string, string>, body: string) => fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers, body })],
] as const;
const post = FRONTS[0][1];

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  const body = OpenAIErrorBody.parse(await res.json());
  expect(body.error.code).toBe(code);
  return body;
}

describe.each(FRONTS)("verification of forwarded calls, through %s", (front, post) => {
  const postBytes = (headers: Record<string, string>, body: Uint8Array) =>
    front === "app.request()"
      ? pool.app.request("/v1/chat/completions", { method: "POST", headers, body })
      : fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers, body });
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

  it("answers 400 invalid_json for a signed body that is not UTF-8, though it would parse with a replacement character", async () => {
    const bytes = Buffer.concat([Buffer.from('{"model":"m","messages":[{"role":"user","content":"'), Buffer.from([0xff]), Buffer.from('"}]}')]);
    const fields = (await signedCall()).fields;
    const headers = await signedForwardHeaders(SIGNING_KEY, { method: "POST", path: POOL_PATHS.chatCompletions }, fields, new Uint8Array(bytes));
    await expectError(await postBytes(headers, bytes), 400, "invalid_json");
  });

  it("counts rejections by reason and never reaches the engine with them", async () => {
    const before = engine.calls.length;
    const call = await signedCall({ secret: "another-wrong-secret!" });
    await post(call.headers, call.body);
    expect(engine.calls.length).toBe(before);
    const text = await (await pool.app.request("/metrics", { headers: operatorHeaders() })).text();
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

/**
 * Over a real socket: sends the headers and `firstBytes` of a chunked body and leaves
 * the body open. Resolves with the answer the pool gives while the body is still
 * being sent (rejects if none comes within 3 s, e.g. because the pool waits for the
 * rest of the body).
 */
function openBody(headers: Record<string, string>, firstBytes: string | undefined): { answer: Promise<{ status: number; body: string }>; req: ClientRequest } {
  const req = httpRequest(`${pool.url}/v1/chat/completions`, { method: "POST", headers });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no answer while the body was still open")), 3_000);
    req.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.on("response", (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
  });
  if (firstBytes === undefined) req.flushHeaders();
  else req.write(firstBytes);
  return { answer, req };
}

const codeOf = (body: string) => OpenAIErrorBody.parse(JSON.parse(body)).error.code;
const rejectedCount = async (reason: string) =>
  metricValue(await pool.metrics.registry.metrics(), `agentix_pool_rejected_requests_total{reason="${reason}"}`) ?? 0;

describe("signature headers before the body, and the body bounded as it streams in (real sockets)", () => {
  it.each([
    ["no signature", (h: Record<string, string>) => { delete h[Header.signature]; }, "missing_signature"],
    ["a malformed signature", (h: Record<string, string>) => { h[Header.signature] = "v3=abc"; }, "invalid_signature"],
    ["a v1 signature", (h: Record<string, string>) => { h[Header.signature] = `v1=${"ab".repeat(32)}`; }, "invalid_signature"],
    ["no key ID", (h: Record<string, string>) => { delete h[Header.keyId]; }, "missing_signature"],
    ["a key the pool does not hold", (h: Record<string, string>) => { h[Header.keyId] = "not-held"; }, "unknown_signing_key"],
    ["a missing field", (h: Record<string, string>) => { delete h[Header.tenant]; }, "invalid_signature"],
    ["a stale timestamp", (h: Record<string, string>) => { h[Header.ts] = String(Date.now() - 60_000); }, "stale_timestamp"],
  ])("answers a call with %s 401 before reading its body", async (_what, tamper, code) => {
    const call = await signedCall();
    const headers = { ...call.headers };
    tamper(headers);
    const { answer, req } = openBody(headers, "x".repeat(1024));
    try {
      const { status, body } = await answer;
      expect(status).toBe(401);
      expect(codeOf(body)).toBe(code);
    } finally {
      req.destroy();
    }
  });

  it("answers 413 at the chunk that passes the limit, while the rest of the body is still coming", async () => {
    const before = await rejectedCount("body_too_large");
    const call = await signedCall();
    const { answer, req } = openBody(call.headers, "x".repeat(64 * 1024 + 1));
    try {
      const { status, body } = await answer;
      expect(status).toBe(413);
      expect(codeOf(body)).toBe("body_too_large");
    } finally {
      req.destroy();
    }
    expect(await rejectedCount("body_too_large")).toBe(before + 1);
  });

  it("answers 413 to a declared Content-Length over the limit before any body byte", async () => {
    const call = await signedCall();
    const { answer, req } = openBody({ ...call.headers, "content-length": String(64 * 1024 + 1) }, undefined);
    try {
      expect((await answer).status).toBe(413);
    } finally {
      req.destroy();
    }
  });

  it("checks replay only after the MAC: a forged call does not burn its call ID", async () => {
    const forged = await signedCall({ secret: "not-the-pool-secret-at-all" });
    await expectError(await post(forged.headers, forged.body), 401, "invalid_signature");
    const genuine = await signedCall({ fields: { call: forged.fields.call } });
    expect((await post(genuine.headers, genuine.body)).status).toBe(200);
  });
});

describe("body limit default", () => {
  it("accepts a 6 MiB long-context call under the default 17 MiB limit (the edge's 16 MiB plus headroom)", async () => {
    const big = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }] }));
    try {
      expect(big.config.maxBodyBytes).toBe(17 * 1024 * 1024);
      const call = await signedCall({ body: chatBody({ messages: [{ role: "user", content: "x".repeat(6 * 1024 * 1024) }] }) });
      const res = await fetch(`${big.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });
      expect(res.status).toBe(200);
    } finally {
      await big.close();
    }
  });
});

describe("signing keys per pool", () => {
  const OLD: SigningKey = { id: "pool-old", secret: "the-old-secret-of-this-pool" };
  const NEW: SigningKey = { id: "pool-new", secret: "the-new-secret-of-this-pool" };

  async function withPool(keys: SigningKey[], run: (p: PoolHandle) => Promise<void>): Promise<void> {
    const p = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }], signingKeys: keys }));
    try {
      await run(p);
    } finally {
      await p.close();
    }
  }
  const postTo = (p: PoolHandle, call: { headers: Record<string, string>; body: string }, path: string = POOL_PATHS.chatCompletions) =>
    p.app.request(path, { method: "POST", headers: call.headers, body: call.body });

  it("accepts calls signed by either of two keys while a secret rotates", async () => {
    await withPool([OLD, NEW], async (p) => {
      for (const key of [OLD, NEW]) {
        const call = await signedCall({ key });
        expect((await postTo(p, call)).status).toBe(200);
      }
    });
  });

  it("refuses the rotated-out key once the pool drops it, and counts it", async () => {
    await withPool([NEW], async (p) => {
      const call = await signedCall({ key: OLD });
      const body = await expectError(await postTo(p, call), 401, "unknown_signing_key");
      expect(body.error.type).toBe("authentication_error");
      expect(body.error.message).toContain("pool-old");
      const text = await p.metrics.registry.metrics();
      expect(metricValue(text, 'agentix_pool_rejected_requests_total{reason="unknown_signing_key"}')).toBe(1);
      expect((await postTo(p, await signedCall({ key: NEW }))).status).toBe(200);
    });
  });

  it("refuses a key ID swapped to another key the pool holds", async () => {
    await withPool([OLD, NEW], async (p) => {
      const call = await signedCall({ key: OLD });
      await expectError(await postTo(p, { ...call, headers: { ...call.headers, [Header.keyId]: NEW.id } }), 401, "invalid_signature");
    });
  });

  it("binds a signature to its route: a call's signature does not pass as an event batch's, nor the reverse", async () => {
    const call = await signedCall({ body: { events: [{ type: "tool_started", tool: "bash", thread: "main" }] } });
    await expectError(await postTo(pool, call, POOL_PATHS.toolEvents), 401, "invalid_signature");
    const events = await signedEvents();
    await expectError(await postTo(pool, { ...events, body: JSON.stringify(chatBody()) }), 401, "invalid_signature");
    // On its own route the batch verifies: the refusal above did not burn its ID.
    expect((await postTo(pool, events, POOL_PATHS.toolEvents)).status).toBe(202);
  });

  it("the legacy signingSecret is the key \"default\"", async () => {
    const p = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }], signingKeys: undefined, signingSecret: SIGNING_KEY.secret }));
    try {
      expect((await postTo(p, await signedCall({ key: { id: "default", secret: SIGNING_KEY.secret } }))).status).toBe(200);
      await expectError(await postTo(p, await signedCall()), 401, "unknown_signing_key");
    } finally {
      await p.close();
    }
  });
});
