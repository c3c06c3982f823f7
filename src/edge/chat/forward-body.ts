import type { HTTPException } from "hono/http-exception";
import {
  ChatCompletionRequest,
  MESSAGE_EXTENSION_PREFIX,
  MESSAGE_FIELDS,
  type MaxTokensField,
  maxTokensField,
  REQUEST_FIELDS,
  requestedMaxTokens,
} from "../../protocol/chat.js";
import { invalidRequest, openAIError } from "../../protocol/errors.js";
import { parseJsonBytes } from "../http/body.js";

/*
 * The body the edge forwards to the pool is built, not copied: the parsed request
 * with only the fields ChatCompletionRequest / ChatMessage name (OpenAI's
 * chat-completions subset, protocol/chat.ts) plus the engine extensions the tenant's
 * plan allows, and the call's effective completion limit set. Its bytes are what the
 * edge signs and sends, so a tenant cannot pass engine knobs (min_tokens, ignore_eos,
 * kv_transfer_params, LoRA or model overrides, …) the plan does not allow, nor run an
 * engine past the limit its reservation covers.
 */

/** A parsed chat request whose every field is allowed for its tenant. */
export interface AllowedChatRequest {
  request: ChatCompletionRequest;
  /** What the client asked for (max_completion_tokens ?? max_tokens), if anything. */
  requestedMaxTokens: number | undefined;
  /** The field the client's limit is in (max_completion_tokens wins); max_tokens when none: the `param` of limit errors. */
  maxTokensField: MaxTokensField;
}

/** 400 for a field the API does not have and the plan does not allow as an extension. */
export const unsupportedParameter = (param: string, where: string, api = "chat-completions"): HTTPException =>
  openAIError(
    400,
    `Unrecognized request argument supplied: ${param}. ${where} Agentix forwards only OpenAI's ${api} fields ` +
      "and the engine extensions your plan allows.",
    { code: "unsupported_parameter", param },
  );
const unsupported = (param: string, where: string) => unsupportedParameter(param, where);

/**
 * Parses a chat-completions body (JSON, then the zod schema) and refuses, with 400
 * naming the field, any top-level key that is neither one of the request's fields nor
 * an allowed extension, and any message key that is neither a message field nor an
 * allowed `messages.<key>` extension. Touches no state.
 */
export function parseChatRequest(bytes: Uint8Array, allowedExtensions: readonly string[]): AllowedChatRequest {
  const parsed = ChatCompletionRequest.safeParse(parseJsonBytes(bytes));
  if (!parsed.success) throw invalidRequest(parsed.error);
  const request = parsed.data;
  const allowed = new Set(allowedExtensions);
  for (const key of Object.keys(request)) {
    if (!REQUEST_FIELDS.has(key) && !allowed.has(key)) throw unsupported(key, "It is not a chat-completions field.");
  }
  request.messages.forEach((message, index) => {
    for (const key of Object.keys(message)) {
      if (!MESSAGE_FIELDS.has(key) && !allowed.has(`${MESSAGE_EXTENSION_PREFIX}${key}`)) {
        throw unsupported(`messages.${index}.${key}`, "It is not a field of a chat message.");
      }
    }
  });
  return { request, requestedMaxTokens: requestedMaxTokens(request), maxTokensField: maxTokensField(request) };
}

/**
 * The bytes to sign and send to the pool: the allowed request re-serialised, with the
 * effective completion limit in the field(s) the client used (both when it sent both),
 * or in `max_tokens` (what vLLM and SGLang read) when it used neither.
 */
export function forwardBody(request: ChatCompletionRequest, maxTokens: number): Uint8Array<ArrayBuffer> {
  // prompt_cache_key is the edge's (the call's session key), not the engine's.
  const { prompt_cache_key: _sessionKey, ...forwarded } = request;
  const body: Record<string, unknown> = forwarded;
  const usedCompletion = request.max_completion_tokens !== undefined && request.max_completion_tokens !== null;
  const usedMax = request.max_tokens !== undefined && request.max_tokens !== null;
  // A null limit means "none": drop it so an engine never reads null where the limit belongs.
  delete body.max_completion_tokens;
  delete body.max_tokens;
  if (usedCompletion) body.max_completion_tokens = maxTokens;
  if (usedMax || !usedCompletion) body.max_tokens = maxTokens;
  // TextEncoder always allocates a fresh ArrayBuffer (never a shared one).
  return new TextEncoder().encode(JSON.stringify(body)) as Uint8Array<ArrayBuffer>;
}
