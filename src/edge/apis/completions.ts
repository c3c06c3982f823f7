import { Usage } from "../../protocol/chat.js";
import { COMPLETION_REQUEST_FIELDS, CompletionRequest, completionPromptText, TextCompletion } from "../../protocol/completions.js";
import { invalidRequest } from "../../protocol/errors.js";
import { POOL_PATHS } from "../../protocol/signing.js";
import { countTokens } from "../../protocol/tokens.js";
import { unsupportedParameter } from "../chat/forward-body.js";
import { SseRelayFilter } from "../chat/sse-filter.js";
import { parseJsonBytes } from "../http/body.js";
import { type CallApiSpec, jsonBytes } from "./call-api.js";

/**
 * OpenAI's legacy completions (`POST /v1/completions`): one prompt, one choice. The
 * stream has chat's framing (chunks, a usage-only chunk, `data: [DONE]`), so the same
 * filter reads it.
 */
export const completionsApi: CallApiSpec = {
  api: "completions",
  poolPath: POOL_PATHS.completions,
  parse(bytes, allowedExtensions) {
    const parsed = CompletionRequest.safeParse(parseJsonBytes(bytes));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const request = parsed.data;
    const allowed = new Set(allowedExtensions);
    for (const key of Object.keys(request)) {
      if (!COMPLETION_REQUEST_FIELDS.has(key) && !allowed.has(key)) throw unsupportedParameter(key, "It is not a completions field.", "completions");
    }
    return {
      model: request.model,
      stream: request.stream === true,
      includeUsage: request.stream_options?.include_usage === true,
      requestedMaxTokens: request.max_tokens ?? undefined,
      maxTokensField: "max_tokens",
      promptEstimate: countTokens(completionPromptText(request.prompt) + (request.suffix ?? "")),
      forwardBody: (maxTokens) => jsonBytes({ ...request, max_tokens: maxTokens }),
    };
  },
  usageOf(answer) {
    if (!TextCompletion.safeParse(answer).success) return undefined;
    const usage = Usage.safeParse((answer as { usage?: unknown }).usage);
    return usage.success ? usage.data : undefined;
  },
  streamFilter: (includeUsage) => new SseRelayFilter(includeUsage),
};
