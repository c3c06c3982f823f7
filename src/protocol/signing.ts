import { z } from "zod";
import { FORWARD_FIELD_ORDER, type ForwardFields, forwardHeaders, type HeaderLookup, parseForwardHeaders } from "./forward.js";
import { Header } from "./headers.js";

/*
 * HMAC-SHA256 over a canonical string, with WebCrypto only, so the edge (workerd)
 * and the pool (Node) run the same code. The canonical string is, joined by "\n":
 *
 *   v3, the method (uppercase), the pool's API path, the key ID,
 *   the forward fields in FORWARD_FIELD_ORDER, the body's SHA-256 (hex).
 *
 * The method and path bind a signature to its route (a call's signature does not
 * pass as a tool-event batch's); the key ID names which of the pool's secrets made
 * it, and is covered by the MAC. Header values cannot hold a newline, and the
 * method, path and key ID are validated, so joining by "\n" is unambiguous.
 */

// v3: the context generation joined the fields (v2 had none; a v2 edge is told to update).
const SIGNATURE_VERSION = "v3";
const encoder = new TextEncoder();

/** A signing key's ID when a deployment names none (the legacy single-secret form). */
export const DEFAULT_SIGNING_KEY_ID = "default";

/** SigningKeyId's one rule: a string passes it exactly when it matches (tested directly where every call is checked). */
const SIGNING_KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
export const SigningKeyId = z.string().regex(SIGNING_KEY_ID, "key id: 1–64 of letters, digits, . _ -");
export const SigningSecret = z.string().min(16, "must be at least 16 characters");

/** One shared HMAC secret and the ID the signature names it by. */
export const SigningKey = z.strictObject({ id: SigningKeyId, secret: SigningSecret });
export type SigningKey = z.infer<typeof SigningKey>;

/** The pool's signed API paths: the edge signs the one it calls, the pool verifies with the one its route serves. */
export const POOL_PATHS = {
  chatCompletions: "/v1/chat/completions",
  completions: "/v1/completions",
  messages: "/v1/messages",
  /** Anthropic's count_tokens, counted by an engine's tokenizer (not queued). */
  countTokens: "/v1/messages/count_tokens",
  responses: "/v1/responses",
  toolEvents: "/v1/events",
  /** What the edge knows of a program's KV (it ended or expired): protocol/kv-hints.ts. */
  kvHints: "/v1/kv-hints",
  /** The pool's load and health, read by the edge on a schedule (GET, empty body). */
  status: "/v1/status",
} as const;
export type PoolPath = (typeof POOL_PATHS)[keyof typeof POOL_PATHS];

/** What a signature is bound to besides the fields and body: the request's method and the pool's API path. */
export interface SignedRoute {
  method: string;
  /** The API path (POOL_PATHS), without any base path of the pool's URL. */
  path: string;
}

const METHOD = /^[A-Za-z]{1,16}$/;
// Printable ASCII without spaces: no newline can enter the canonical string.
const PATH = /^\/[\x21-\x7e]{0,1023}$/;

function routeLines(route: SignedRoute): [string, string] {
  if (!METHOD.test(route.method)) throw new RangeError(`signing: invalid method ${JSON.stringify(route.method)}`);
  if (!PATH.test(route.path)) throw new RangeError(`signing: invalid path ${JSON.stringify(route.path)}`);
  return [route.method.toUpperCase(), route.path];
}

/** TextEncoder always allocates a fresh, unshared buffer; the cast only says so. */
const utf8 = (text: string): Uint8Array<ArrayBuffer> => encoder.encode(text) as Uint8Array<ArrayBuffer>;

function toHex(buffer: ArrayBuffer): string {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** A lower-case hex digit's value, or -1. */
function hexDigit(code: number): number {
  if (code >= 48 && code <= 57) return code - 48;
  if (code >= 97 && code <= 102) return code - 87;
  return -1;
}

/** Lower-case hex (whole bytes) as bytes; undefined for anything else. By character codes: no substring or parseInt per byte. */
function fromHex(hex: string): Uint8Array<ArrayBuffer> | undefined {
  if (hex.length === 0 || hex.length % 2 !== 0) return undefined;
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) {
    const high = hexDigit(hex.charCodeAt(2 * i));
    const low = hexDigit(hex.charCodeAt(2 * i + 1));
    if (high < 0 || low < 0) return undefined;
    out[i] = high * 16 + low;
  }
  return out;
}

export type BodyBytes = string | Uint8Array<ArrayBuffer> | ArrayBuffer;

function bytesOf(body: BodyBytes): Uint8Array<ArrayBuffer> | ArrayBuffer {
  return typeof body === "string" ? utf8(body) : body;
}

export async function sha256Hex(body: BodyBytes): Promise<string> {
  return toHex(await crypto.subtle.digest("SHA-256", bytesOf(body)));
}

export async function canonicalString(route: SignedRoute, keyId: string, fields: ForwardFields, body: BodyBytes): Promise<string> {
  return canonicalStringOfDigest(route, keyId, fields, await sha256Hex(body));
}

/** The canonical string when the body's SHA-256 (hex) is already known, e.g. hashed as it streamed in. */
export function canonicalStringOfDigest(route: SignedRoute, keyId: string, fields: ForwardFields, bodySha256Hex: string): string {
  return canonicalPrefix(route, keyId) + canonicalTail(fields, bodySha256Hex);
}

/**
 * The canonical string's first lines, which depend on the route and key only (the version,
 * method, path and key ID, each validated; RangeError otherwise), with the "\n" that
 * follows them: a verifier that sees the same route and key at every call builds it once.
 */
export function canonicalPrefix(route: SignedRoute, keyId: string): string {
  if (!SigningKeyId.safeParse(keyId).success) throw new RangeError(`signing: invalid key id ${JSON.stringify(keyId)}`);
  const [method, path] = routeLines(route);
  return `${SIGNATURE_VERSION}\n${method}\n${path}\n${keyId}\n`;
}

/** The rest of the canonical string after canonicalPrefix: the fields in FORWARD_FIELD_ORDER and the body's SHA-256 (hex). */
export function canonicalTail(fields: ForwardFields, bodySha256Hex: string): string {
  let tail = "";
  for (const key of FORWARD_FIELD_ORDER) tail += `${fields[key]}\n`;
  return tail + bodySha256Hex;
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

/** The `x-agentix-signature` value for this route, key, fields and body. */
export async function signForward(key: SigningKey, route: SignedRoute, fields: ForwardFields, body: BodyBytes): Promise<string> {
  const hmac = await hmacKey(key.secret);
  const mac = await crypto.subtle.sign("HMAC", hmac, utf8(await canonicalString(route, key.id, fields, body)));
  return `${SIGNATURE_VERSION}=${toHex(mac)}`;
}

/** Every header of a signed edge → pool request: the fields, the key ID, the signature and the JSON content type. */
export async function signedForwardHeaders(
  key: SigningKey,
  route: SignedRoute,
  fields: ForwardFields,
  body: BodyBytes,
): Promise<Record<string, string>> {
  return {
    "content-type": "application/json",
    ...forwardHeaders(fields),
    [Header.keyId]: key.id,
    [Header.signature]: await signForward(key, route, fields, body),
  };
}

export type VerifiedForward =
  | { ok: true; fields: ForwardFields; keyId: string }
  | { ok: false; reason: string };

export interface VerifyOptions {
  now: number;
  /** Largest accepted |now − ts|, in ms. */
  windowMs: number;
}

export type SignedForwardHeaders =
  | { ok: true; fields: ForwardFields; keyId: string; mac: Uint8Array<ArrayBuffer> }
  | { ok: false; reason: string };

/** Reasons parseSignedForwardHeaders and verifyForward give, for callers that map them to codes. */
export const SignatureProblem = {
  missingSignature: "missing signature",
  missingKeyId: "missing signing key ID",
  unknownKey: "unknown signing key",
  badSignature: "bad signature",
  staleTimestamp: "stale timestamp",
} as const;

/**
 * What can be checked of a signed forward before its body is read: the signature
 * header is present, of this version and well formed, the key ID is present and well
 * formed, and every field parses. The MAC itself covers the body's hash, so it is
 * checked afterwards (verifyForwardMac).
 */
export function parseSignedForwardHeaders(headers: HeaderLookup): SignedForwardHeaders {
  const signature = headers.get(Header.signature);
  if (!signature) return { ok: false, reason: SignatureProblem.missingSignature };
  const [version, hex] = signature.split("=", 2);
  if (version !== SIGNATURE_VERSION) {
    const named = version && /^v\d{1,3}$/.test(version) ? `version ${version}` : "an unknown version";
    return { ok: false, reason: `signature of ${named} is not accepted (${SIGNATURE_VERSION} expected): update the edge` };
  }
  const mac = hex ? fromHex(hex) : undefined;
  if (!mac) return { ok: false, reason: "malformed signature" };
  const keyId = headers.get(Header.keyId);
  if (!keyId) return { ok: false, reason: SignatureProblem.missingKeyId };
  if (!SIGNING_KEY_ID.test(keyId)) return { ok: false, reason: "malformed signing key ID" };
  const parsed = parseForwardHeaders(headers);
  if (!parsed.ok) return parsed;
  return { ok: true, fields: parsed.fields, keyId, mac };
}

/** The key of `keys` the signature names, or undefined when none has that ID. */
export function signingKeyById(keys: readonly SigningKey[], keyId: string): SigningKey | undefined {
  return keys.find((key) => key.id === keyId);
}

/** Checks a MAC (constant time, by WebCrypto) against the route, key, fields and the body's SHA-256 in hex. */
export async function verifyForwardMac(
  key: SigningKey,
  route: SignedRoute,
  fields: ForwardFields,
  mac: Uint8Array<ArrayBuffer>,
  bodySha256Hex: string,
): Promise<boolean> {
  const hmac = await hmacKey(key.secret);
  return crypto.subtle.verify("HMAC", hmac, mac, utf8(canonicalStringOfDigest(route, key.id, fields, bodySha256Hex)));
}

/**
 * Checks the signature against whichever of `keys` it names (constant time, by
 * WebCrypto) and the timestamp window. Replay of a call ID is the caller's check:
 * it needs state.
 */
export async function verifyForward(
  keys: readonly SigningKey[],
  route: SignedRoute,
  headers: Headers,
  body: BodyBytes,
  options: VerifyOptions,
): Promise<VerifiedForward> {
  const signed = parseSignedForwardHeaders(headers);
  if (!signed.ok) return signed;
  const key = signingKeyById(keys, signed.keyId);
  if (!key) return { ok: false, reason: SignatureProblem.unknownKey };
  if (!(await verifyForwardMac(key, route, signed.fields, signed.mac, await sha256Hex(body)))) {
    return { ok: false, reason: SignatureProblem.badSignature };
  }
  if (Math.abs(options.now - signed.fields.ts) > options.windowMs) return { ok: false, reason: SignatureProblem.staleTimestamp };
  return { ok: true, fields: signed.fields, keyId: signed.keyId };
}
