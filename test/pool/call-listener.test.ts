import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { parsePoolLoad } from "../../src/protocol/pool-status.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { signedCall, testConfig } from "./helpers.js";

/*
 * The pool's socket serves calls from Node's request and response (call-listener.ts) and
 * everything else through Hono; Hono's call routes stay for `app.request()`. Both fronts
 * must be one pool: the same replay sets, the same routes, the same answers.
 */

let engine: FakeEngine;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startFakeEngine();
  pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }] }));
});
afterAll(async () => {
  await pool.close();
  await engine.close();
});

const overSocket = (path: string, init: RequestInit) => fetch(`${pool.url}${path}`, init);
const codeOf = async (res: Response) => OpenAIErrorBody.parse(await res.json()).error.code;

describe("the pool's call listener and Hono's routes", () => {
  it("share the replay set: a call served over the socket is a replay through app.request(), and the reverse", async () => {
    const first = await signedCall();
    expect((await overSocket("/v1/chat/completions", { method: "POST", headers: first.headers, body: first.body })).status).toBe(200);
    const again = await pool.app.request("/v1/chat/completions", { method: "POST", headers: first.headers, body: first.body });
    expect(again.status).toBe(401);
    expect(await codeOf(again)).toBe("replayed_call");

    const second = await signedCall();
    expect((await pool.app.request("/v1/chat/completions", { method: "POST", headers: second.headers, body: second.body })).status).toBe(200);
    const replayed = await overSocket("/v1/chat/completions", { method: "POST", headers: second.headers, body: second.body });
    expect(replayed.status).toBe(401);
    expect(await codeOf(replayed)).toBe("replayed_call");
  });

  it("serves a call whose target carries a query, as Hono's router did", async () => {
    const call = await signedCall();
    const res = await overSocket("/v1/chat/completions?trace=1", { method: "POST", headers: call.headers, body: call.body });
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.engine)).toBe("e1");
    expect(res.headers.get(Header.poolLoad)).not.toBeNull();
  });

  it("states the pool's load without the call it answers: a lone call's whole answer says 0", async () => {
    // The attempt's own bookkeeping follows the write (relay.ts endAfterAnswer); the call is done by the time its headers are made.
    for (let i = 0; i < 3; i++) {
      const call = await signedCall();
      const res = await overSocket("/v1/chat/completions", { method: "POST", headers: call.headers, body: call.body });
      expect(res.status).toBe(200);
      expect(parsePoolLoad(res.headers.get(Header.poolLoad))).toBe(0);
      await res.arrayBuffer();
    }
  });

  it("leaves other methods and spellings of the call paths to Hono", async () => {
    const get = await overSocket("/v1/chat/completions", { method: "GET" });
    expect(get.status).toBe(404);
    expect(await codeOf(get)).toBe("not_found");
    const call = await signedCall();
    const slash = await overSocket("/v1/chat/completions/", { method: "POST", headers: call.headers, body: call.body });
    expect(slash.status).toBe(404);
    expect(await codeOf(slash)).toBe("not_found");
  });

  it("leaves a call with a Host it does not take as is to @hono/node-server, which refuses a malformed one as before", async () => {
    const send = async (host: string) => {
      const call = await signedCall();
      const url = new URL(pool.url);
      return new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: url.hostname, port: url.port, path: "/v1/chat/completions", method: "POST", headers: { ...call.headers, host } }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", reject);
        req.end(call.body);
      });
    };
    expect(await send("bad host")).toBe(400);
    expect(await send(`pool.example:99999`)).toBe(400);
    // Valid, only not plain: served, through Hono.
    expect(await send("POOL.EXAMPLE")).toBe(200);
    expect(await send("[::1]:8080")).toBe(200);
    expect(await send("pool.example:8080")).toBe(200);
  });

  it("answers a refused call in OpenAI's shape with its headers, as Hono's onError did", async () => {
    const call = await signedCall();
    const res = await overSocket("/v1/chat/completions", { method: "POST", headers: { ...call.headers, [Header.signature]: "v3=00" }, body: call.body });
    expect(res.status).toBe(401);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await codeOf(res)).toBe("invalid_signature");
  });
});
