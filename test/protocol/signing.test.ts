import { describe, expect, it } from "vitest";
import { type ForwardFields, forwardHeaders } from "../../src/protocol/forward.js";
import { Header } from "../../src/protocol/headers.js";
import { signForward, verifyForward } from "../../src/protocol/signing.js";

const SECRET = "s3cret";
const NOW = 1_780_000_000_000;
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
  ts: NOW,
};
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });

async function signedHeaders(f = fields, b = body, secret = SECRET): Promise<Headers> {
  const headers = new Headers(forwardHeaders(f));
  headers.set(Header.signature, await signForward(secret, f, b));
  return headers;
}

describe("edge → pool signing", () => {
  it("verifies what it signed and returns the parsed fields", async () => {
    const result = await verifyForward(SECRET, await signedHeaders(), body, { now: NOW + 10, windowMs: 30_000 });
    expect(result).toEqual({ ok: true, fields });
  });

  it("accepts an empty engine (no affinity yet)", async () => {
    const f = { ...fields, engine: "" };
    const result = await verifyForward(SECRET, await signedHeaders(f), body, { now: NOW, windowMs: 1 });
    expect(result.ok).toBe(true);
  });

  it.each([
    ["a wrong secret", async () => signedHeaders(fields, body, "other")],
    [
      "a tampered header",
      async () => {
        const h = await signedHeaders();
        h.set(Header.serviceMs, "0");
        return h;
      },
    ],
  ])("rejects %s", async (_name, make) => {
    const result = await verifyForward(SECRET, await make(), body, { now: NOW, windowMs: 30_000 });
    expect(result).toEqual({ ok: false, reason: "bad signature" });
  });

  it("rejects a tampered body", async () => {
    const result = await verifyForward(SECRET, await signedHeaders(), `${body} `, { now: NOW, windowMs: 30_000 });
    expect(result).toEqual({ ok: false, reason: "bad signature" });
  });

  it("rejects a stale or future timestamp", async () => {
    const headers = await signedHeaders();
    expect(await verifyForward(SECRET, headers, body, { now: NOW + 30_001, windowMs: 30_000 })).toEqual({
      ok: false,
      reason: "stale timestamp",
    });
    expect((await verifyForward(SECRET, headers, body, { now: NOW - 30_001, windowMs: 30_000 })).ok).toBe(false);
  });

  it("rejects missing and malformed signatures and missing fields", async () => {
    const headers = await signedHeaders();
    const noSig = new Headers(headers);
    noSig.delete(Header.signature);
    expect(await verifyForward(SECRET, noSig, body, { now: NOW, windowMs: 1 })).toEqual({
      ok: false,
      reason: "missing signature",
    });
    const badSig = new Headers(headers);
    badSig.set(Header.signature, "v1=zz");
    expect((await verifyForward(SECRET, badSig, body, { now: NOW, windowMs: 1 })).ok).toBe(false);
    const noTenant = new Headers(headers);
    noTenant.delete(Header.tenant);
    expect(await verifyForward(SECRET, noTenant, body, { now: NOW, windowMs: 1 })).toEqual({
      ok: false,
      reason: "bad or missing tenant",
    });
  });
});
