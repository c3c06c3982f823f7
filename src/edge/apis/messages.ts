import { invalidRequest } from "../../protocol/errors.js";
import { z } from "zod";
import { MessagesRequest, MessagesUsage, unknownRequestFields } from "../../protocol/messages.js";
import { POOL_PATHS } from "../../protocol/signing.js";
import { estimateMessagesInputTokens, messagesToChatRequest } from "../../protocol/translate/messages-chat.js";
import { canonicalConversation, messagesReplyOf } from "../recognition/replies.js";
import { unsupportedParameter } from "../chat/forward-body.js";
import { chatUsageOfMessages, MessagesStreamFilter } from "../chat/messages-stream-filter.js";
import { parseJsonBytes } from "../http/body.js";
import { type CallApiSpec, jsonBytes } from "./call-api.js";

/**
 * Anthropic's Messages API (`POST /v1/messages`). `max_tokens` is required there, so
 * every call names its limit; the edge forwards the admitted one. Usage, cached tokens
 * included, comes in Anthropic's fields; errors are reshaped on the way out
 * (middleware/anthropic-shape.ts).
 */
const AnswerUsage = z.looseObject({ usage: MessagesUsage });

export const messagesApi: CallApiSpec = {
  api: "messages",
  poolPath: POOL_PATHS.messages,
  parse(bytes, allowedExtensions) {
    const parsed = MessagesRequest.safeParse(parseJsonBytes(bytes));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const request = parsed.data;
    const allowed = new Set(allowedExtensions);
    const unknown = unknownRequestFields(request).find((key) => !allowed.has(key));
    if (unknown !== undefined) throw unsupportedParameter(unknown, "It is not a Messages API field.", "Anthropic Messages");
    return {
      model: request.model,
      stream: request.stream === true,
      // Anthropic streams always carry their usage (message_start, message_delta).
      includeUsage: true,
      requestedMaxTokens: request.max_tokens,
      maxTokensField: "max_tokens",
      promptEstimate: estimateMessagesInputTokens(request),
      forwardBody: (maxTokens) => jsonBytes({ ...request, max_tokens: maxTokens }),
      conversation: canonicalConversation(messagesToChatRequest(request).messages),
      // Claude Code puts its session in metadata.user_id.
      ...(typeof request.metadata?.user_id === "string" && request.metadata.user_id !== "" ? { sessionKey: `anthropic.user_id:${request.metadata.user_id.slice(0, 512)}` } : {}),
      replyOf: messagesReplyOf,
    };
  },
  usageOf(answer) {
    // Only the usage is read: an engine serving Messages natively may omit or add fields elsewhere (vLLM leaves out nulls).
    const message = AnswerUsage.safeParse(answer);
    return message.success ? chatUsageOfMessages(message.data.usage) : undefined;
  },
  streamFilter: () => new MessagesStreamFilter(),
};
