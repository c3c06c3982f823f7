import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ForwardFields } from "../../src/protocol/forward.js";
import { POOL_PATHS, type SignedRoute, type SigningKey, sha256Hex, signForward } from "../../src/protocol/signing.js";
import { hmacSha256, verifyForwardMacSync } from "../../src/pool/node-mac.js";

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

describe("hmacSha256 (the pool's HMAC from each key's pads)", () => {
  // Secrets shorter than, as long as and longer than SHA-256's 64-byte block (hashed first), and multi-byte ones.
  const secrets = ["0123456789abcdef", "x".repeat(63), "y".repeat(64), "z".repeat(65), "k".repeat(300), "sécrèt-ключ-秘密-0123456789"];
  const messages = ["", "v3\nPOST\n/v1/chat/completions\nk\n", "héllo ключ 秘密 😀", "m".repeat(5_000), "é".repeat(3_000)];

  it("is createHmac's HMAC-SHA256 for every secret and message length", () => {
    for (const secret of secrets) {
      for (const message of messages) {
        const key: SigningKey = { id: "k", secret };
        expect(hmacSha256(key, message).toString("hex"), `${secret.length} / ${message.length}`).toBe(createHmac("sha256", secret).update(message).digest("hex"));
      }
    }
  });

  it("follows a key object whose secret changed", () => {
    const key: SigningKey = { id: "k", secret: "first-secret-0123456789" };
    expect(hmacSha256(key, "m").toString("hex")).toBe(createHmac("sha256", key.secret).update("m").digest("hex"));
    key.secret = "second-secret-0123456789";
    expect(hmacSha256(key, "m").toString("hex")).toBe(createHmac("sha256", key.secret).update("m").digest("hex"));
  });
});

describe("verifyForwardMacSync across keys and routes (each key's canonical prefix built once)", () => {
  it("accepts each key's signature on each route in turn, and refuses it under the other key or route", async () => {
    const second: SigningKey = { id: "pool-a.2", secret: "the-second-secret-of-pool-a" };
    const events: SignedRoute = { method: "POST", path: POOL_PATHS.toolEvents };
    const digest = await sha256Hex(body);
    for (let round = 0; round < 2; round++) {
      for (const key of [KEY, second]) {
        for (const route of [CALL, events]) {
          const mac = await macOf(key, route, fields);
          expect(verifyForwardMacSync(key, route, fields, mac, digest)).toBe(true);
          expect(verifyForwardMacSync(key === KEY ? second : KEY, route, fields, mac, digest)).toBe(false);
          expect(verifyForwardMacSync(key, route === CALL ? events : CALL, fields, mac, digest)).toBe(false);
        }
      }
    }
  });

  it("refuses a method or path that cannot be signed, as the canonical string does", () => {
    const mac = new Uint8Array(32);
    expect(() => verifyForwardMacSync(KEY, { method: "PO ST", path: POOL_PATHS.chatCompletions }, fields, mac, "00")).toThrow(RangeError);
    expect(() => verifyForwardMacSync(KEY, { method: "POST", path: "/v1/a b" }, fields, mac, "00")).toThrow(RangeError);
  });
});
