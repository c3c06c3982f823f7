import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode, UnofficialStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import { OpenAIErrorBody, type OpenAIErrorOptions, openAIErrorBody } from "../protocol/errors.js";

/*
 * What a tenant may read of the pool's errors. The edge relays the pool's answers
 * (and a stream's events unchanged), so a call's error body says only a fixed
 * message per kind, in OpenAI's shape, with the call's ID (`x-agentix-call`) as
 * `error.request_id`; engine IDs, addresses, errno and the engine's own words go to
 * the pool's log, with the same call ID, where an operator can find them.
 *
 * The one exception is an engine's 4xx about the request itself (a prompt longer
 * than the context, an unknown model): its message is the tenant's to read, since it
 * says what to change in their own request, so it is kept, but capped and with
 * anything that looks like an address or a file path taken out (engines echo model
 * paths and URLs of their deployment).
 */

/** The pool's error body for a call: OpenAI's, plus the call's ID. */
export const PoolCallErrorBody = OpenAIErrorBody.extend({
  error: OpenAIErrorBody.shape.error.extend({ request_id: z.string() }),
});
export type PoolCallErrorBody = z.infer<typeof PoolCallErrorBody>;

/** The fixed message of each kind of failure a tenant may see. */
export const CALL_ERROR_MESSAGES = {
  engine_unavailable: "No engine could serve the call; retry shortly",
  engine_response_error: "The engine's answer broke off; retry the call",
  engine_stream_error: "The engine stopped before the answer was complete",
  call_cancelled: "The call was cancelled before the answer was complete",
  engine_rejected_request: "The engine refused the request",
  internal_error: "Internal pool error",
} as const;

export function callErrorBody(status: number, message: string, callId: string, options: OpenAIErrorOptions = {}): PoolCallErrorBody {
  const { error } = openAIErrorBody(status, message, options);
  return { error: { ...error, request_id: callId } };
}

export function callErrorResponse(
  status: ContentfulStatusCode | UnofficialStatusCode,
  message: string,
  callId: string,
  options: OpenAIErrorOptions = {},
): Response {
  return Response.json(callErrorBody(status, message, callId, options), { status, headers: options.headers });
}

/** An HTTPException whose response is callErrorResponse's (for errors thrown before a call is queued). */
export function callError(status: ContentfulStatusCode, message: string, callId: string, options: OpenAIErrorOptions = {}): HTTPException {
  return new HTTPException(status, { message, res: callErrorResponse(status, message, callId, options) });
}

/** Characters of an engine's 4xx message a tenant gets, of the message the redaction reads, and of the body parsed. */
const MAX_ENGINE_MESSAGE_CHARS = 300;
const MAX_ENGINE_TEXT_CHARS = 2_000;
const MAX_ENGINE_BODY_CHARS = 64 * 1024;
const REDACTED = "[redacted]";

/*
 * Addresses and paths, each pattern with bounded quantifiers (the text is an
 * engine's, capped first): URLs, IPv4 and bracketed IPv6 with an optional port, bare
 * IPv6, dotted host names or localhost with a port, and absolute paths of two or
 * more segments.
 */
const ADDRESS_PATTERNS: readonly RegExp[] = [
  /\b[a-zA-Z][a-zA-Z0-9+.-]{0,15}:\/\/[^\s"'<>`]{1,2000}/g,
  /\[[0-9a-fA-F:.]{2,45}(?:%[\w.-]{1,16})?\](?::\d{1,5})?/g,
  /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g,
  /\b(?:[0-9a-fA-F]{1,4}:){2,7}[0-9a-fA-F]{1,4}\b/g,
  /\b(?:localhost|[a-zA-Z0-9-]{1,63}(?:\.[a-zA-Z0-9-]{1,63}){1,10}):\d{2,5}\b/g,
  /(?<![\w.])(?:\/[\w.@~+-]{1,255}){2,32}\/?/g,
];

/** An engine's 4xx message, fit for the tenant: addresses and paths out, capped. */
export function redactEngineMessage(text: string): string {
  let out = text.slice(0, MAX_ENGINE_TEXT_CHARS);
  for (const pattern of ADDRESS_PATTERNS) out = out.replace(pattern, REDACTED);
  out = out.replace(/\s+/g, " ").trim();
  return out.length > MAX_ENGINE_MESSAGE_CHARS ? `${out.slice(0, MAX_ENGINE_MESSAGE_CHARS - 1)}…` : out;
}

type JsonRecord = Record<string, unknown>;
const isRecord = (value: unknown): value is JsonRecord => typeof value === "object" && value !== null && !Array.isArray(value);
const shortToken = (value: unknown): string | undefined =>
  typeof value === "string" && /^[\w.:[\]-]{1,64}$/.test(value) ? value : undefined;

/**
 * What an engine's 4xx body says: OpenAI's `{"error":{…}}`, vLLM's and SGLang's
 * older `{"object":"error","message",…}` or FastAPI's `{"detail":…}`. A body that is
 * not JSON (an HTML page of a proxy in front of the engine) says nothing a tenant
 * should read.
 */
function engineErrorParts(text: string): { message?: string; code?: string; param?: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return {};
  }
  if (!isRecord(json)) return {};
  const inner = isRecord(json.error) ? json.error : json;
  const detail = inner.detail;
  const message =
    typeof inner.message === "string"
      ? inner.message
      : typeof detail === "string"
        ? detail
        : Array.isArray(detail) && isRecord(detail[0]) && typeof detail[0].msg === "string"
          ? detail[0].msg
          : undefined;
  const parts: { message?: string; code?: string; param?: string } = {};
  if (message !== undefined) parts.message = message;
  const code = shortToken(inner.code);
  const param = shortToken(inner.param);
  if (code !== undefined) parts.code = code;
  if (param !== undefined) parts.param = param;
  return parts;
}

/** The tenant's answer to an engine's 4xx about the request: its message redacted and capped, its status and code kept. */
export function engineRequestErrorResponse(status: ContentfulStatusCode, engineText: string, callId: string, headers?: Record<string, string>): Response {
  const parts = engineText.length > MAX_ENGINE_BODY_CHARS ? {} : engineErrorParts(engineText);
  const message = parts.message === undefined ? "" : redactEngineMessage(parts.message);
  return callErrorResponse(status, message === "" ? CALL_ERROR_MESSAGES.engine_rejected_request : message, callId, {
    code: parts.code ?? null,
    param: parts.param ?? null,
    ...(headers === undefined ? {} : { headers }),
  });
}
