import { FORWARD_FIELD_ORDER, type ForwardFields, forwardHeaders, parseForwardHeaders } from "./forward.js";
import { Header } from "./headers.js";

/*
 * HMAC-SHA256 over a canonical string of the forward fields and the body's
 * SHA-256, with WebCrypto only, so the edge (workerd) and the pool (Node) run the
 * same code. Header values cannot hold a newline, so joining by "\n" is unambiguous.
 */

const SIGNATURE_VERSION = "v1";
const encoder = new TextEncoder();

/** TextEncoder always allocates a fresh, unshared buffer; the cast only says so. */
const utf8 = (text: string): Uint8Array<ArrayBuffer> => encoder.encode(text) as Uint8Array<ArrayBuffer>;

function toHex(buffer: ArrayBuffer): string {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

function fromHex(hex: string): Uint8Array<ArrayBuffer> | undefined {
  if (!/^(?:[0-9a-f]{2})+$/.test(hex)) return undefined;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

export type BodyBytes = string | Uint8Array<ArrayBuffer> | ArrayBuffer;

function bytesOf(body: BodyBytes): Uint8Array<ArrayBuffer> | ArrayBuffer {
  return typeof body === "string" ? utf8(body) : body;
}

export async function sha256Hex(body: BodyBytes): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", bytesOf(body)));
}

export async function canonicalString(fields: ForwardFields, body: BodyBytes): Promise<string> {
  return canonicalStringOfDigest(fields, await sha256Hex(body));
}

/** The canonical string when the body's SHA-256 (hex) is already known, e.g. hashed as it streamed in. */
function canonicalStringOfDigest(fields: ForwardFields, bodySha256Hex: string): string {
  const values = FORWARD_FIELD_ORDER.map((key) => String(fields[key]));
  return [SIGNATURE_VERSION, ...values, bodySha256Hex].join("\n");
}

type HmacKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

// Importing a key costs as much as the MAC itself, and a process uses one or two
// secrets for its whole life: import each once.
const importedKeys = new Map<string, Promise<HmacKey>>();
const MAX_CACHED_KEYS = 8;

function hmacKey(secret: string): Promise<HmacKey> {
  let key = importedKeys.get(secret);
  if (!key) {
    if (importedKeys.size >= MAX_CACHED_KEYS) importedKeys.clear();
    key = crypto.subtle.importKey("raw", utf8(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    importedKeys.set(secret, key);
  }
  return key;
}

/** The `x-agentix-signature` value for these fields and body. */
export async function signForward(secret: string, fields: ForwardFields, body: BodyBytes): Promise<string> {
  const key = await hmacKey(secret);
  const mac = await crypto.subtle.sign("HMAC", key, utf8(await canonicalString(fields, body)));
  return `${SIGNATURE_VERSION}=${toHex(mac)}`;
}

/** Every header of a signed edge → pool request: the fields, the signature and the JSON content type. */
export async function signedForwardHeaders(
  secret: string,
  fields: ForwardFields,
  body: BodyBytes,
): Promise<Record<string, string>> {
  return {
    "content-type": "application/json",
    ...forwardHeaders(fields),
    [Header.signature]: await signForward(secret, fields, body),
  };
}

export type VerifiedForward =
  | { ok: true; fields: ForwardFields }
  | { ok: false; reason: string };

export interface VerifyOptions {
  now: number;
  /** Largest accepted |now − ts|, in ms. */
  windowMs: number;
}

export type SignedForwardHeaders =
  | { ok: true; fields: ForwardFields; mac: Uint8Array<ArrayBuffer> }
  | { ok: false; reason: string };

/**
 * What can be checked of a signed forward before its body is read: the signature
 * header is present and well formed, and every field parses. The MAC itself covers
 * the body's hash, so it is checked afterwards (verifyForwardMac).
 */
export function parseSignedForwardHeaders(headers: Headers): SignedForwardHeaders {
  const signature = headers.get(Header.signature);
  if (!signature) return { ok: false, reason: "missing signature" };
  const [version, hex] = signature.split("=", 2);
  const mac = hex ? fromHex(hex) : undefined;
  if (version !== SIGNATURE_VERSION || !mac) return { ok: false, reason: "malformed signature" };
  const parsed = parseForwardHeaders(headers);
  if (!parsed.ok) return parsed;
  return { ok: true, fields: parsed.fields, mac };
}

/** Checks a MAC (constant time, by WebCrypto) against the fields and the body's SHA-256 in hex. */
export async function verifyForwardMac(
  secret: string,
  fields: ForwardFields,
  mac: Uint8Array<ArrayBuffer>,
  bodySha256Hex: string,
): Promise<boolean> {
  const key = await hmacKey(secret);
  return crypto.subtle.verify("HMAC", key, mac, utf8(canonicalStringOfDigest(fields, bodySha256Hex)));
}

/**
 * Checks the signature (constant time, by WebCrypto) and the timestamp window.
 * Replay of a call ID is the caller's check: it needs state.
 */
export async function verifyForward(
  secret: string,
  headers: Headers,
  body: BodyBytes,
  options: VerifyOptions,
): Promise<VerifiedForward> {
  const signed = parseSignedForwardHeaders(headers);
  if (!signed.ok) return signed;
  if (!(await verifyForwardMac(secret, signed.fields, signed.mac, await sha256Hex(body)))) return { ok: false, reason: "bad signature" };
  if (Math.abs(options.now - signed.fields.ts) > options.windowMs) return { ok: false, reason: "stale timestamp" };
  return { ok: true, fields: signed.fields };
}
