import { describe, expect, it } from "vitest";
import { type ForwardFields, forwardHeaders } from "../../src/protocol/forward.js";
import { Header } from "../../src/protocol/headers.js";
import {
  canonicalString,
  POOL_PATHS,
  type SignedRoute,
  type SigningKey,
  SigningKey as SigningKeySchema,
  sha256Hex,
  signForward,
  signedForwardHeaders,
  verifyForward,
} from "../../src/protocol/signing.js";

const KEY: SigningKey = { id: "pool-a.1", secret: "s3cret-s3cret-s3cret" };
const OTHER_KEY: SigningKey = { id: "pool-a.2", secret: "another-secret-of-pool-a" };
const CALL: SignedRoute = { method: "POST", path: POOL_PATHS.chatCompletions };
const EVENTS: SignedRoute = { method: "POST", path: POOL_PATHS.toolEvents };
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
  generation: 3,
  ts: NOW,
};
const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });
const window = { now: NOW, windowMs: 30_000 };

async function signedHeaders(f = fields, b = body, key = KEY, route = CALL): Promise<Headers> {
  return new Headers(await signedForwardHeaders(key, route, f, b));
}

describe("edge → pool signing", () => {
  it("verifies what it signed and returns the parsed fields and the key ID", async () => {
    const headers = await signedHeaders();
    expect(headers.get(Header.keyId)).toBe(KEY.id);
    expect(headers.get(Header.signature)).toMatch(/^v3=[0-9a-f]{64}$/);
    const result = await verifyForward([KEY], CALL, headers, body, { now: NOW + 10, windowMs: 30_000 });
    expect(result).toEqual({ ok: true, fields, keyId: KEY.id });
  });

  it("signs version, method, path, key ID, the fields in order and the body hash, one per line", async () => {
    const text = await canonicalString({ method: "post", path: POOL_PATHS.toolEvents }, KEY.id, fields, body);
    expect(text.split("\n")).toEqual([
      "v3",
      "POST",
      "/v1/events",
      "pool-a.1",
      "ten_a",
      "prog_abcdefgh",
      "main",
      "call_1",
      "1200.5",
      "800",
      "30",
      "e1",
      "2",
      "3",
      String(NOW),
      await sha256Hex(body),
    ]);
  });

  it("refuses a method or path that could break the canonical string", async () => {
    await expect(signForward(KEY, { method: "POST\nX", path: "/v1/events" }, fields, body)).rejects.toThrow(/method/);
    await expect(signForward(KEY, { method: "POST", path: "/v1/events\n/x" }, fields, body)).rejects.toThrow(/path/);
    await expect(signForward(KEY, { method: "POST", path: "v1/events" }, fields, body)).rejects.toThrow(/path/);
    await expect(signForward({ id: "a\nb", secret: KEY.secret }, CALL, fields, body)).rejects.toThrow(/key id/);
  });

  it("accepts an empty engine (no affinity yet)", async () => {
    const f = { ...fields, engine: "" };
    const result = await verifyForward([KEY], CALL, await signedHeaders(f), body, { now: NOW, windowMs: 1 });
    expect(result.ok).toBe(true);
  });

  it("accepts a signature by either held key (rotation)", async () => {
    for (const key of [KEY, OTHER_KEY]) {
      const result = await verifyForward([KEY, OTHER_KEY], CALL, await signedHeaders(fields, body, key), body, window);
      expect(result).toMatchObject({ ok: true, keyId: key.id });
    }
  });

  it("refuses a key ID the verifier does not hold, before any MAC", async () => {
    const result = await verifyForward([OTHER_KEY], CALL, await signedHeaders(), body, window);
    expect(result).toEqual({ ok: false, reason: "unknown signing key" });
  });

  it.each([
    ["a wrong secret under the right key ID", async () => signedHeaders(fields, body, { id: KEY.id, secret: "other-secret-other" })],
    [
      "a tampered header",
      async () => {
        const h = await signedHeaders();
        h.set(Header.serviceMs, "0");
        return h;
      },
    ],
    [
      "a forged context generation (an older one, to keep a replaced context)",
      async () => {
        const h = await signedHeaders();
        h.set(Header.contextGeneration, "2");
        return h;
      },
    ],
    [
      "the key ID swapped to another key the verifier holds",
      async () => {
        const h = await signedHeaders();
        h.set(Header.keyId, OTHER_KEY.id);
        return h;
      },
    ],
    [
      "the key ID swapped, with the same secret behind both IDs",
      async () => {
        const h = await signedHeaders(fields, body, { id: OTHER_KEY.id, secret: KEY.secret });
        h.set(Header.keyId, KEY.id);
        return h;
      },
    ],
  ])("rejects %s", async (_name, make) => {
    const result = await verifyForward([KEY, OTHER_KEY], CALL, await make(), body, window);
    expect(result).toEqual({ ok: false, reason: "bad signature" });
  });

  it("binds a signature to its path: a call's signature replayed against /v1/events fails", async () => {
    const headers = await signedHeaders(fields, body, KEY, CALL);
    expect((await verifyForward([KEY], CALL, headers, body, window)).ok).toBe(true);
    expect(await verifyForward([KEY], EVENTS, headers, body, window)).toEqual({ ok: false, reason: "bad signature" });
    const events = await signedHeaders(fields, body, KEY, EVENTS);
    expect(await verifyForward([KEY], CALL, events, body, window)).toEqual({ ok: false, reason: "bad signature" });
  });

  it("binds a signature to its method", async () => {
    const headers = await signedHeaders();
    expect(await verifyForward([KEY], { ...CALL, method: "PUT" }, headers, body, window)).toEqual({ ok: false, reason: "bad signature" });
    // The method is compared uppercase, as HTTP spells it.
    expect((await verifyForward([KEY], { ...CALL, method: "post" }, headers, body, window)).ok).toBe(true);
  });

  it("rejects a tampered body", async () => {
    const result = await verifyForward([KEY], CALL, await signedHeaders(), `${body} `, window);
    expect(result).toEqual({ ok: false, reason: "bad signature" });
  });

  it("rejects a stale or future timestamp", async () => {
    const headers = await signedHeaders();
    expect(await verifyForward([KEY], CALL, headers, body, { now: NOW + 30_001, windowMs: 30_000 })).toEqual({
      ok: false,
      reason: "stale timestamp",
    });
    expect((await verifyForward([KEY], CALL, headers, body, { now: NOW - 30_001, windowMs: 30_000 })).ok).toBe(false);
  });

  it.each(["v1", "v2"])("refuses a %s signature with a message that says to update the edge", async (version) => {
    const headers = await signedHeaders();
    headers.set(Header.signature, `${version}=${"ab".repeat(32)}`);
    const result = await verifyForward([KEY], CALL, headers, body, window);
    expect(result).toEqual({ ok: false, reason: `signature of version ${version} is not accepted (v3 expected): update the edge` });
    // Also without the key ID header, as a v1 edge sends it.
    headers.delete(Header.keyId);
    expect(await verifyForward([KEY], CALL, headers, body, window)).toEqual(result);
  });

  it.each([
    ["no signature", Header.signature, undefined, "missing signature"],
    ["a malformed signature", Header.signature, "v3=zz", "malformed signature"],
    ["an upper-case hex signature", Header.signature, `v3=${"AB".repeat(32)}`, "malformed signature"],
    ["an odd-length hex signature", Header.signature, `v3=${"a".repeat(63)}`, "malformed signature"],
    ["a hex signature with a stray character", Header.signature, `v3=${"ab".repeat(31)}a-`, "malformed signature"],
    ["no key ID", Header.keyId, undefined, "missing signing key ID"],
    ["a malformed key ID", Header.keyId, "no spaces allowed", "malformed signing key ID"],
    ["no tenant", Header.tenant, undefined, "bad or missing tenant"],
  ])("rejects %s", async (_what, name, value, reason) => {
    const headers = await signedHeaders();
    if (value === undefined) headers.delete(name);
    else headers.set(name, value);
    expect(await verifyForward([KEY], CALL, headers, body, window)).toEqual({ ok: false, reason });
  });

  it("only carries the forward fields, the key ID and the signature", async () => {
    const headers = await signedForwardHeaders(KEY, CALL, fields, body);
    expect(Object.keys(headers).sort()).toEqual(
      ["content-type", ...Object.keys(forwardHeaders(fields)), Header.keyId, Header.signature].sort(),
    );
  });
});

describe("signing keys", () => {
  it.each([
    [{ id: "local-1", secret: "0123456789abcdef" }, true],
    [{ id: "A.b_c-9", secret: "0123456789abcdef" }, true],
    [{ id: "", secret: "0123456789abcdef" }, false],
    [{ id: "x".repeat(65), secret: "0123456789abcdef" }, false],
    [{ id: "a/b", secret: "0123456789abcdef" }, false],
    [{ id: "a b", secret: "0123456789abcdef" }, false],
    [{ id: "ok", secret: "0123456789abcde" }, false],
  ])("%j valid: %s", (key, valid) => {
    expect(SigningKeySchema.safeParse(key).success).toBe(valid);
  });
});
