import { z } from "zod";
import { Header } from "./headers.js";

/**
 * What the edge tells the pool about a call, beside the unchanged body. Every
 * field travels as one header and is covered by the signature.
 */
export const ForwardFields = z.object({
  tenant: z.string().min(1),
  program: z.string().min(1),
  thread: z.string().min(1),
  call: z.string().min(1),
  serviceMs: z.number().nonnegative(),
  pathMs: z.number().nonnegative(),
  waitMs: z.number().nonnegative(),
  /** Engine that served the program last; empty when none has. */
  engine: z.string(),
  weight: z.number().positive(),
  /** The thread's context generation (core/recognition/context-generation.ts); 0 for requests that are not a call. */
  generation: z.int().nonnegative(),
  ts: z.int().nonnegative(),
});
export type ForwardFields = z.infer<typeof ForwardFields>;

const FIELD_HEADERS = {
  tenant: Header.tenant,
  program: Header.program,
  thread: Header.thread,
  call: Header.call,
  serviceMs: Header.serviceMs,
  pathMs: Header.pathMs,
  waitMs: Header.waitMs,
  engine: Header.engine,
  weight: Header.weight,
  generation: Header.contextGeneration,
  ts: Header.ts,
} as const satisfies Record<keyof ForwardFields, string>;

/** Fixed order of the canonical string; changing it is a protocol version bump. */
export const FORWARD_FIELD_ORDER = Object.keys(FIELD_HEADERS) as (keyof ForwardFields)[];

export function forwardHeaders(fields: ForwardFields): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of FORWARD_FIELD_ORDER) out[FIELD_HEADERS[key]] = String(fields[key]);
  return out;
}

/** A number field's form on the wire: decimal digits and an optional fraction (no sign, exponent, spaces or hex). */
const DECIMAL = /^\d+(\.\d+)?$/;
const NUMBER_FIELDS: ReadonlySet<keyof ForwardFields> = new Set(["serviceMs", "pathMs", "waitMs", "weight", "generation", "ts"]);

export type ParsedForward =
  | { ok: true; fields: ForwardFields }
  | { ok: false; reason: string };

/**
 * What reading a request's signed headers needs: WHATWG `Headers.get` (repeated headers
 * joined with ", "), from a Web Request or from Node's parsed headers (the pool).
 * Names are asked in lower case.
 */
export type HeaderLookup = Pick<Headers, "get">;

/**
 * The fields of a request's headers, checked by one zod parse (ForwardFields): a number
 * field in its wire form becomes a number first; any other value is left a string,
 * which ForwardFields refuses. (A schema of header strings piped into ForwardFields
 * parsed every call's fields twice, ~4 % of the pool's work before its engine request.)
 */
export function parseForwardHeaders(headers: HeaderLookup): ParsedForward {
  const raw: Record<string, string | number | undefined> = {};
  for (const key of FORWARD_FIELD_ORDER) {
    const value = headers.get(FIELD_HEADERS[key]) ?? undefined;
    raw[key] = value !== undefined && NUMBER_FIELDS.has(key) && DECIMAL.test(value) ? Number(value) : value;
  }
  // What ForwardFields accepts, it accepts as is; zod decides (and words) everything else.
  if (plainlyForwardFields(raw)) return { ok: true, fields: raw };
  const parsed = ForwardFields.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `bad or missing ${issue?.path.join(".") ?? "header"}` };
  }
  return { ok: true, fields: parsed.data };
}

const nonEmpty = (value: unknown): boolean => typeof value === "string" && value.length > 0;
/** z.number(): a finite number (NaN and ±Infinity refused), here also ≥ 0 (nonnegative). */
const nonNegative = (value: unknown): boolean => typeof value === "number" && Number.isFinite(value) && value >= 0;
/** z.int(): a safe integer, here also ≥ 0. */
const nonNegativeInt = (value: unknown): boolean => typeof value === "number" && Number.isSafeInteger(value) && value >= 0;

/**
 * True only when ForwardFields.safeParse(raw) would succeed, giving raw back (raw holding only its keys): its
 * rules, written out for the header parse every call makes (zod's parse of the 11 fields
 * was ~4 % of the pool's work before its engine request). Anything this does not accept
 * goes to zod, which stays the source of truth and of every refusal's wording; a test
 * checks the two agree on generated input (test/protocol/forward.test.ts).
 */
export function plainlyForwardFields(raw: Readonly<Record<string, unknown>>): raw is ForwardFields {
  return (
    nonEmpty(raw.tenant) &&
    nonEmpty(raw.program) &&
    nonEmpty(raw.thread) &&
    nonEmpty(raw.call) &&
    nonNegative(raw.serviceMs) &&
    nonNegative(raw.pathMs) &&
    nonNegative(raw.waitMs) &&
    typeof raw.engine === "string" &&
    typeof raw.weight === "number" &&
    Number.isFinite(raw.weight) &&
    raw.weight > 0 &&
    nonNegativeInt(raw.generation) &&
    nonNegativeInt(raw.ts)
  );
}
