import { hash, timingSafeEqual } from "node:crypto";
import type { ForwardFields } from "../protocol/forward.js";
import { canonicalPrefix, canonicalTail, type SignedRoute, type SigningKey } from "../protocol/signing.js";

/*
 * The pool's check of an edge signature: the same canonical string and HMAC-SHA256 as
 * protocol/signing.ts verifyForwardMac, with node:crypto instead of WebCrypto. A
 * WebCrypto verify is an async job on libuv's pool (a promise and a thread hop per
 * call, ~4 % of the pool's busy time in bench:proxy's profile); node:crypto is
 * synchronous. The edge (workerd) keeps WebCrypto: this file is the pool's only.
 *
 * The HMAC is RFC 2104's, computed from each key's pads (made once per key) with two
 * one-shot SHA-256 calls: createHmac per call built a Hmac object and set up OpenSSL's
 * HMAC context from the secret every time (with the CPU caches taken by other
 * processes between calls, as at one connection here: ~21 µs against ~14 µs a MAC in a
 * cache-thrashing loop). The canonical string's route and key lines are built once per
 * key and route, not validated again per call.
 */

/** SHA-256's block size: a key is padded (or first hashed) to it. */
const BLOCK_BYTES = 64;
const DIGEST_BYTES = 32;

/** One key's HMAC state: its inner and outer pads, and its canonical prefixes by route. */
interface KeyMac {
  /** The secret the pads were made from (a key object changed since is padded again). */
  secret: string;
  innerPad: Uint8Array;
  outerPad: Uint8Array;
  prefixes: Map<string, string>;
}

const keyMacs = new WeakMap<SigningKey, KeyMac>();
/** A route seen per key is one of the pool's few; a bound all the same. */
const MAX_PREFIXES = 16;

function keyMacOf(key: SigningKey): KeyMac {
  let state = keyMacs.get(key);
  if (state === undefined || state.secret !== key.secret) {
    let secret: Uint8Array = Buffer.from(key.secret, "utf8");
    if (secret.byteLength > BLOCK_BYTES) secret = hash("sha256", secret, "buffer");
    const innerPad = new Uint8Array(BLOCK_BYTES);
    const outerPad = new Uint8Array(BLOCK_BYTES);
    for (let i = 0; i < BLOCK_BYTES; i++) {
      const byte = secret[i] ?? 0;
      innerPad[i] = byte ^ 0x36;
      outerPad[i] = byte ^ 0x5c;
    }
    state = { secret: key.secret, innerPad, outerPad, prefixes: new Map() };
    keyMacs.set(key, state);
  }
  return state;
}

function prefixOf(state: KeyMac, key: SigningKey, route: SignedRoute): string {
  const name = `${key.id} ${route.method} ${route.path}`;
  let prefix = state.prefixes.get(name);
  if (prefix === undefined) {
    // Validates the method, path and key ID (RangeError), as canonicalStringOfDigest does.
    prefix = canonicalPrefix(route, key.id);
    if (state.prefixes.size >= MAX_PREFIXES) state.prefixes.clear();
    state.prefixes.set(name, prefix);
  }
  return prefix;
}

/** The inner hash's input (inner pad, then the message as UTF-8), reused: the MAC is synchronous. */
let innerInput = Buffer.allocUnsafe(2048);
/** The outer hash's input: outer pad, then the inner digest. */
const outerInput = Buffer.allocUnsafe(BLOCK_BYTES + DIGEST_BYTES);

/** HMAC-SHA256 of `message` (UTF-8) under `key`'s secret, as createHmac("sha256", key.secret) computes it. */
export function hmacSha256(key: SigningKey, message: string): Buffer {
  return macWith(keyMacOf(key), message);
}

function macWith(state: KeyMac, message: string): Buffer {
  // UTF-8 takes at most 3 bytes per UTF-16 code unit.
  const most = BLOCK_BYTES + message.length * 3;
  if (innerInput.byteLength < most) innerInput = Buffer.allocUnsafe(most);
  innerInput.set(state.innerPad, 0);
  const length = innerInput.write(message, BLOCK_BYTES, "utf8");
  const inner = hash("sha256", innerInput.subarray(0, BLOCK_BYTES + length), "buffer");
  outerInput.set(state.outerPad, 0);
  outerInput.set(inner, BLOCK_BYTES);
  return hash("sha256", outerInput, "buffer");
}

/** True when `mac` is the HMAC of the canonical string for this route, key, fields and body digest (constant-time compare). */
export function verifyForwardMacSync(
  key: SigningKey,
  route: SignedRoute,
  fields: ForwardFields,
  mac: Uint8Array,
  bodySha256Hex: string,
): boolean {
  const state = keyMacOf(key);
  const expected = macWith(state, prefixOf(state, key, route) + canonicalTail(fields, bodySha256Hex));
  return mac.byteLength === expected.byteLength && timingSafeEqual(mac, expected);
}
