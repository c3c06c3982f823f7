import { z } from "zod";
import type { OpenAIErrorBody } from "./errors.js";

/*
 * The subset of Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens)
 * that Agentix accepts: the single source of truth for its wire format. Agentix serves
 * it by translating to chat completions (translate/messages-chat.ts), so it accepts
 * only what that translation can honour: client tools, text, images as base64 or URL,
 * and the sampling fields engines read. Server tools, documents, Files-API sources and
 * `thinking` are refused by these schemas (400 naming the field) rather than dropped,
 * so a client never believes a request was honoured that was not.
 *
 * As in chat.ts, the request is a loose object so that an unknown top-level key
 * survives parsing and the edge can refuse it by name (MESSAGES_REQUEST_FIELDS);
 * content blocks are loose because Anthropic adds fields to them (`cache_control`,
 * `citations`, …) that mean nothing to an engine and are dropped in translation.
 */

// ---------------------------------------------------------------- request blocks

export const TextBlock = z.looseObject({ type: z.literal("text"), text: z.string() });
export type TextBlock = z.infer<typeof TextBlock>;

const ImageSource = z.discriminatedUnion("type", [
  z.looseObject({
    type: z.literal("base64"),
    media_type: z.enum(["image/jpeg", "image/png", "image/gif", "image/webp"]),
    data: z.string().min(1),
  }),
  z.looseObject({ type: z.literal("url"), url: z.string().min(1) }),
]);

export const ImageBlock = z.looseObject({ type: z.literal("image"), source: ImageSource });
export type ImageBlock = z.infer<typeof ImageBlock>;

export const ToolUseBlock = z.looseObject({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
});
export type ToolUseBlock = z.infer<typeof ToolUseBlock>;

export const ToolResultBlock = z.looseObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.discriminatedUnion("type", [TextBlock, ImageBlock]))]).optional(),
  is_error: z.boolean().optional(),
});
export type ToolResultBlock = z.infer<typeof ToolResultBlock>;

/** Earlier turns' reasoning, replayed by clients that ran with thinking on: accepted, not forwarded. */
const ThinkingBlock = z.looseObject({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().optional() });
const RedactedThinkingBlock = z.looseObject({ type: z.literal("redacted_thinking"), data: z.string() });

export const ContentBlock = z.discriminatedUnion("type", [
  TextBlock,
  ImageBlock,
  ToolUseBlock,
  ToolResultBlock,
  ThinkingBlock,
  RedactedThinkingBlock,
]);
export type ContentBlock = z.infer<typeof ContentBlock>;

export const MessageParam = z.looseObject({
  role: z.enum(["user", "assistant"]),
  content: z.union([z.string(), z.array(ContentBlock)]),
});
export type MessageParam = z.infer<typeof MessageParam>;

export const ToolParam = z.looseObject({
  /** Anthropic's name for a client tool; any other type is a server tool, which no engine runs. */
  type: z.literal("custom").optional(),
  name: z.string().min(1),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal("object") }),
});
export type ToolParam = z.infer<typeof ToolParam>;

const parallel = { disable_parallel_tool_use: z.boolean().optional() };
export const ToolChoice = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("auto"), ...parallel }),
  z.strictObject({ type: z.literal("any"), ...parallel }),
  z.strictObject({ type: z.literal("tool"), name: z.string().min(1), ...parallel }),
  z.strictObject({ type: z.literal("none") }),
]);
export type ToolChoice = z.infer<typeof ToolChoice>;

// ---------------------------------------------------------------- requests

export const MessagesRequest = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.int().positive(),
  messages: z.array(MessageParam).min(1),
  system: z.union([z.string(), z.array(TextBlock)]).optional(),
  tools: z.array(ToolParam).optional(),
  tool_choice: ToolChoice.optional(),
  // The translated request carries these as `stop`, which chat.ts caps at OpenAI's 4.
  stop_sequences: z.array(z.string().min(1)).max(4).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.int().nonnegative().optional(),
  stream: z.boolean().optional(),
  metadata: z.strictObject({ user_id: z.string().max(256).nullable().optional() }).optional(),
  /**
   * Extended thinking, as Claude Code may ask for it: accepted so such clients work
   * unchanged, not forwarded (the engines behind Agentix serve no Anthropic thinking;
   * an answer simply has no thinking blocks).
   */
  thinking: z
    .discriminatedUnion("type", [z.looseObject({ type: z.literal("enabled"), budget_tokens: z.int().positive() }), z.looseObject({ type: z.literal("disabled") })])
    .optional(),
  /** Accepted and ignored: Agentix has one tier. */
  service_tier: z.enum(["auto", "standard_only"]).optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;

/** POST /v1/messages/count_tokens: the request without what only generation needs. */
export const CountTokensRequest = MessagesRequest.omit({ max_tokens: true, stream: true });
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;

export const CountTokensResponse = z.object({ input_tokens: z.int().nonnegative() });
export type CountTokensResponse = z.infer<typeof CountTokensResponse>;

/** The request's own top-level fields: an edge refuses any other key (Anthropic's or not) with 400. */
export const MESSAGES_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(MessagesRequest.shape));
export const COUNT_TOKENS_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(CountTokensRequest.shape));

/** The top-level keys of a parsed request that `fields` does not name, in the request's order. */
export function unknownRequestFields(request: object, fields: ReadonlySet<string> = MESSAGES_REQUEST_FIELDS): string[] {
  return Object.keys(request).filter((key) => !fields.has(key));
}

// ---------------------------------------------------------------- responses

export const StopReason = z.enum(["end_turn", "max_tokens", "stop_sequence", "tool_use"]);
export type StopReason = z.infer<typeof StopReason>;

/**
 * Anthropic counts input three ways that add up to the prompt: `input_tokens` (neither
 * read from nor written to the cache), `cache_read_input_tokens`, `cache_creation_input_tokens`.
 */
export const MessagesUsage = z.object({
  input_tokens: z.int().nonnegative(),
  output_tokens: z.int().nonnegative(),
  cache_creation_input_tokens: z.int().nonnegative().nullable().optional(),
  cache_read_input_tokens: z.int().nonnegative().nullable().optional(),
});
export type MessagesUsage = z.infer<typeof MessagesUsage>;

export const ResponseTextBlock = z.object({ type: z.literal("text"), text: z.string() });
export const ResponseToolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string(),
  name: z.string(),
  input: z.record(z.string(), z.unknown()),
});
export const ResponseContentBlock = z.discriminatedUnion("type", [ResponseTextBlock, ResponseToolUseBlock]);
export type ResponseContentBlock = z.infer<typeof ResponseContentBlock>;

export const MessagesResponse = z.object({
  id: z.string().startsWith("msg_"),
  type: z.literal("message"),
  role: z.literal("assistant"),
  content: z.array(ResponseContentBlock),
  model: z.string(),
  stop_reason: StopReason.nullable(),
  stop_sequence: z.string().nullable(),
  usage: MessagesUsage,
});
export type MessagesResponse = z.infer<typeof MessagesResponse>;

// ---------------------------------------------------------------- errors

/** Anthropic's error types and the status each is sent with. */
export const MESSAGES_ERROR_STATUS = Object.freeze({
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  overloaded_error: 529,
} as const);
export type MessagesErrorType = keyof typeof MESSAGES_ERROR_STATUS;
const ERROR_TYPES = Object.keys(MESSAGES_ERROR_STATUS) as [MessagesErrorType, ...MessagesErrorType[]];

/** `{"type":"error","error":{"type","message"}}`: the body of a failed call and a stream's `error` event alike. */
export const MessagesErrorBody = z.object({
  type: z.literal("error"),
  error: z.object({ type: z.enum(ERROR_TYPES), message: z.string() }),
});
export type MessagesErrorBody = z.infer<typeof MessagesErrorBody>;

/**
 * The type Anthropic would give a status. 503 is "overloaded" too: the edge answers it
 * when no pool or engine can take the call (queue_full, no_healthy_engine, …), which is
 * what Anthropic's 529 means, and Anthropic's clients retry both. Statuses Anthropic
 * has no type for (409, 422, …) are the client's request: invalid_request_error.
 */
export function messagesErrorType(status: number): MessagesErrorType {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503 || status === 529) return "overloaded_error";
  if (status >= 500) return "api_error";
  return "invalid_request_error";
}

/**
 * Anthropic's error body for a status, with the message of the OpenAI-shaped error the
 * edge and the pool produce (errors.ts). The type follows the status, not OpenAI's type:
 * the status is what the client's retry logic reads, and both are always sent together.
 * OpenAI's `code` and `param` have no place in Anthropic's body; the edge's messages
 * already name the field and the cause.
 */
export function messagesErrorBody(status: number, error: OpenAIErrorBody | string): MessagesErrorBody {
  const message = typeof error === "string" ? error : error.error.message;
  return { type: "error", error: { type: messagesErrorType(status), message } };
}

// ---------------------------------------------------------------- streaming events

const index = z.int().nonnegative();

export const MessageStartEvent = z.object({ type: z.literal("message_start"), message: MessagesResponse });
export const ContentBlockStartEvent = z.object({
  type: z.literal("content_block_start"),
  index,
  content_block: ResponseContentBlock,
});
export const ContentBlockDelta = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text_delta"), text: z.string() }),
  z.object({ type: z.literal("input_json_delta"), partial_json: z.string() }),
]);
export type ContentBlockDelta = z.infer<typeof ContentBlockDelta>;
export const ContentBlockDeltaEvent = z.object({ type: z.literal("content_block_delta"), index, delta: ContentBlockDelta });
export const ContentBlockStopEvent = z.object({ type: z.literal("content_block_stop"), index });
/** Usage in message_delta is cumulative; the input counts are there when they were unknown at message_start. */
export const MessageDeltaEvent = z.object({
  type: z.literal("message_delta"),
  delta: z.object({ stop_reason: StopReason.nullable(), stop_sequence: z.string().nullable() }),
  usage: MessagesUsage.partial().required({ output_tokens: true }),
});
export const MessageStopEvent = z.object({ type: z.literal("message_stop") });
export const PingEvent = z.object({ type: z.literal("ping") });

export const MessagesStreamEvent = z.discriminatedUnion("type", [
  MessageStartEvent,
  ContentBlockStartEvent,
  ContentBlockDeltaEvent,
  ContentBlockStopEvent,
  MessageDeltaEvent,
  MessageStopEvent,
  PingEvent,
  MessagesErrorBody,
]);
export type MessagesStreamEvent = z.infer<typeof MessagesStreamEvent>;

/** Serialises one event as Anthropic sends it: the event name repeats the payload's type. */
export function formatMessagesEvent(event: MessagesStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}
