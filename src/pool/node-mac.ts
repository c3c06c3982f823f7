import { createHmac, timingSafeEqual } from "node:crypto";
import type { ForwardFields } from "../protocol/forward.js";
import { canonicalStringOfDigest, type SignedRoute, type SigningKey } from "../protocol/signing.js";

/*
 * The pool's check of an edge signature: the same canonical string and HMAC-SHA256 as
 * protocol/signing.ts verifyForwardMac, with node:crypto instead of WebCrypto. A
 * WebCrypto verify is an async job on libuv's pool (a promise and a thread hop per
 * call, ~4 % of the pool's busy time in bench:proxy's profile); createHmac over a
 * few hundred bytes is synchronous and a few microseconds. The edge (workerd) keeps
 * WebCrypto: this file is the pool's only.
 */

/** True when `mac` is the HMAC of the canonical string for this route, key, fields and body digest (constant-time compare). */
export function verifyForwardMacSync(
  key: SigningKey,
  route: SignedRoute,
  fields: ForwardFields,
  mac: Uint8Array,
  bodySha256Hex: string,
): boolean {
  const expected = createHmac("sha256", key.secret).update(canonicalStringOfDigest(route, key.id, fields, bodySha256Hex)).digest();
  return mac.byteLength === expected.byteLength && timingSafeEqual(mac, expected);
}
