import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";

/** OpenAI's error body: `{"error":{"message","type","code","param"}}`. */
export const OpenAIErrorBody = z.object({
  error: z.object({
    message: z.string(),
    type: z.string(),
    code: z.string().nullable(),
    param: z.string().nullable(),
  }),
});
export type OpenAIErrorBody = z.infer<typeof OpenAIErrorBody>;

export const OPENAI_ERROR_TYPES = Object.freeze([
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "not_found_error",
  "rate_limit_error",
  // OpenAI's type for a spent quota (billing), as opposed to a rate limit.
  "insufficient_quota",
  "server_error",
] as const);
export type OpenAIErrorType = (typeof OPENAI_ERROR_TYPES)[number];

export function isOpenAIErrorType(value: string): value is OpenAIErrorType {
  return (OPENAI_ERROR_TYPES as readonly string[]).includes(value);
}

function defaultType(status: number): OpenAIErrorType {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

export interface OpenAIErrorOptions {
  type?: OpenAIErrorType;
  code?: string | null;
  param?: string | null;
  headers?: Record<string, string>;
}

export function openAIErrorBody(
  status: number,
  message: string,
  options: OpenAIErrorOptions = {},
): OpenAIErrorBody {
  return {
    error: {
      message,
      type: options.type ?? defaultType(status),
      code: options.code ?? null,
      param: options.param ?? null,
    },
  };
}

export function openAIErrorResponse(
  status: ContentfulStatusCode,
  message: string,
  options: OpenAIErrorOptions = {},
): Response {
  return Response.json(openAIErrorBody(status, message, options), {
    status,
    headers: options.headers,
  });
}

/**
 * An `HTTPException` whose response is already in OpenAI's shape, so a Hono
 * `onError` that returns `err.getResponse()` answers every failure the same way.
 */
export function openAIError(
  status: ContentfulStatusCode,
  message: string,
  options: OpenAIErrorOptions = {},
): HTTPException {
  return new HTTPException(status, {
    message,
    res: openAIErrorResponse(status, message, options),
  });
}

/** Turns a zod failure into one 400 naming the first offending field. */
export function invalidRequest(error: z.ZodError, prefix = ""): HTTPException {
  const issue = error.issues[0];
  // A strict object's unknown key is named by the issue, not by its path (the object's).
  const path = issue?.code === "unrecognized_keys" && issue.keys[0] !== undefined ? [...issue.path, issue.keys[0]] : (issue?.path ?? []);
  const param = path.length > 0 ? path.join(".") : null;
  const where = param ? `${prefix}${param}: ` : "";
  return openAIError(400, `Invalid request: ${where}${issue?.message ?? "malformed body"}`, {
    code: "invalid_request",
    param: param ? `${prefix}${param}` : null,
  });
}
