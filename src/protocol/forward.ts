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
  const parsed = ForwardFields.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, reason: `bad or missing ${issue?.path.join(".") ?? "header"}` };
  }
  return { ok: true, fields: parsed.data };
}
