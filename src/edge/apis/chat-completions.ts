import { ChatCompletion } from "../../protocol/chat.js";
import { POOL_PATHS } from "../../protocol/signing.js";
import { estimatePromptTokens } from "../../protocol/tokens.js";
import { forwardBody, parseChatRequest } from "../chat/forward-body.js";
import { SseRelayFilter } from "../chat/sse-filter.js";
import { canonicalConversation, chatReplyOf } from "../recognition/replies.js";
import { type CallApiSpec, promptCacheSessionKey } from "./call-api.js";

/** OpenAI's chat completions (`POST /v1/chat/completions`). */
export const chatCompletionsApi: CallApiSpec = {
  api: "chat.completions",
  poolPath: POOL_PATHS.chatCompletions,
  parse(bytes, allowedExtensions) {
    const { request, requestedMaxTokens, maxTokensField } = parseChatRequest(bytes, allowedExtensions);
    return {
      model: request.model,
      stream: request.stream === true,
      includeUsage: request.stream_options?.include_usage === true,
      requestedMaxTokens,
      maxTokensField,
      promptEstimate: estimatePromptTokens(request),
      forwardBody: (maxTokens) => forwardBody(request, maxTokens),
      conversation: canonicalConversation(request.messages),
      ...promptCacheSessionKey(request.prompt_cache_key),
      replyOf: chatReplyOf,
    };
  },
  usageOf(answer) {
    const completion = ChatCompletion.safeParse(answer);
    return completion.success ? (completion.data.usage ?? undefined) : undefined;
  },
  streamFilter: (includeUsage) => new SseRelayFilter(includeUsage),
};
