import { invalidRequest } from "../../protocol/errors.js";
import { z } from "zod";
import { type InputItem, ResponsesRequest, ResponseUsage, unknownResponsesFields } from "../../protocol/responses.js";
import { POOL_PATHS } from "../../protocol/signing.js";
import { estimatePromptTokens } from "../../protocol/tokens.js";
import { conversationItemsOf, responsesToChatRequest } from "../../protocol/translate/responses-chat.js";
import { unsupportedParameter } from "../chat/forward-body.js";
import { chatUsageOfResponse, ResponsesStreamFilter } from "../chat/responses-stream-filter.js";
import { parseJsonBytes } from "../http/body.js";
import { canonicalConversation, responsesReplyOf } from "../recognition/replies.js";
import { type CallApiSpec, jsonBytes, type ParsedCall, promptCacheSessionKey } from "./call-api.js";

/**
 * OpenAI's Responses API (`POST /v1/responses`). A `previous_response_id` is resolved
 * by the edge (routes/calls.ts asks the response's program for its conversation,
 * withHistory puts it before the input), so the pool gets the whole conversation and
 * keeps no state. A response with `store` not false is kept in its program for the
 * next one (afterAnswer).
 */
/** What is kept of a response: its ID and output (the rest of the object is the answer's, not the conversation's). */
const StoredResponse = z.looseObject({ id: z.string().min(1), output: z.array(z.unknown()) });

function parsedResponses(request: ResponsesRequest, history: readonly InputItem[]): ParsedCall {
  const { previous_response_id: previous, ...rest } = request;
  const chat = responsesToChatRequest(request, history);
  return {
    model: request.model,
    stream: request.stream === true,
    includeUsage: true,
    requestedMaxTokens: request.max_output_tokens ?? undefined,
    maxTokensField: "max_output_tokens",
    promptEstimate: estimatePromptTokens(chat),
    conversation: canonicalConversation(chat.messages),
    ...promptCacheSessionKey(request.prompt_cache_key),
    replyOf: responsesReplyOf,
    forwardBody: (maxTokens) => jsonBytes({ ...rest, input: [...history, ...request.input], max_output_tokens: maxTokens }),
    ...(previous ? { continues: previous } : {}),
    withHistory: (items) => parsedResponses(request, items as InputItem[]),
    afterAnswer(answer) {
      if (request.store === false) return undefined;
      const response = StoredResponse.safeParse(answer);
      if (!response.success) return undefined;
      return { responseId: response.data.id, parentId: previous ?? null, items: conversationItemsOf(request, response.data) };
    },
  };
}

export const responsesApi: CallApiSpec = {
  api: "responses",
  poolPath: POOL_PATHS.responses,
  parse(bytes, allowedExtensions) {
    const parsed = ResponsesRequest.safeParse(parseJsonBytes(bytes));
    if (!parsed.success) throw invalidRequest(parsed.error);
    const allowed = new Set(allowedExtensions);
    const unknown = unknownResponsesFields(parsed.data).find((key) => !allowed.has(key));
    if (unknown !== undefined) throw unsupportedParameter(unknown, "It is not a Responses API field.", "Responses API");
    return parsedResponses(parsed.data, []);
  },
  usageOf(answer) {
    const usage = ResponseUsage.safeParse((StoredResponse.safeParse(answer).data as { usage?: unknown } | undefined)?.usage);
    return usage.success ? chatUsageOfResponse(usage.data) : undefined;
  },
  streamFilter: () => new ResponsesStreamFilter(),
};
