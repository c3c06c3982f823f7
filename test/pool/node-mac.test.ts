import { describe, expect, it } from "vitest";
import type { ForwardFields } from "../../src/protocol/forward.js";
import { POOL_PATHS, type SignedRoute, type SigningKey, sha256Hex, signForward } from "../../src/protocol/signing.js";
import { verifyForwardMacSync } from "../../src/pool/node-mac.js";

/* The pool's node:crypto check must accept exactly what the edge's WebCrypto signing produces. */

const KEY: SigningKey = { id: "pool-a.1", secret: "s3cret-s3cret-s3cret" };
const OTHER_KEY: SigningKey = { id: "pool-a.1", secret: "another-secret-of-pool-a" };
const CALL: SignedRoute = { method: "POST", path: POOL_PATHS.chatCompletions };
const fields: ForwardFields = {
  tenant: "ten_a",
  program: "prog_abcdefgh",
  thread: "main",
  call: "call_1",
  serviceMs: 1200.5,
  pathMs: 800,
  waitMs: 30,
  engine: "e1",
  weight: 2,
  generation: 3,
  ts: 1_780_000_000_000,
};
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "héllo" }] });

async function macOf(key: SigningKey, route: SignedRoute, f: ForwardFields): Promise<Uint8Array> {
  const signature = await signForward(key, route, f, body);
  return Buffer.from(signature.slice("v3=".length), "hex");
}

describe("verifyForwardMacSync (pool side)", () => {
  it("accepts the edge's WebCrypto signature", async () => {
    expect(verifyForwardMacSync(KEY, CALL, fields, await macOf(KEY, CALL, fields), await sha256Hex(body))).toBe(true);
  });

  it("rejects a flipped bit, a short MAC, another secret, another route, another field and another body", async () => {
    const mac = await macOf(KEY, CALL, fields);
    const digest = await sha256Hex(body);
    const flipped = Uint8Array.from(mac);
    flipped[5] = (flipped[5] ?? 0) ^ 1;
    expect(verifyForwardMacSync(KEY, CALL, fields, flipped, digest)).toBe(false);
    expect(verifyForwardMacSync(KEY, CALL, fields, mac.subarray(0, 31), digest)).toBe(false);
    expect(verifyForwardMacSync(OTHER_KEY, CALL, fields, mac, digest)).toBe(false);
    expect(verifyForwardMacSync(KEY, { method: "POST", path: POOL_PATHS.toolEvents }, fields, mac, digest)).toBe(false);
    expect(verifyForwardMacSync(KEY, CALL, { ...fields, serviceMs: 1200.6 }, mac, digest)).toBe(false);
    expect(verifyForwardMacSync(KEY, CALL, fields, mac, await sha256Hex(`${body} `))).toBe(false);
  });
});
