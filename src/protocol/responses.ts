import { z } from "zod";

/*
 * The subset of OpenAI's Responses API (POST /v1/responses) that Agentix accepts: the
 * single source of truth for its wire format. Agentix serves it by translating to chat
 * completions (translate/responses-chat.ts), so it accepts only what that translation
 * can honour: function tools, text and image input, messages and function calls with
 * their outputs, and the sampling fields engines read. Hosted tools (web search, file
 * search, computer use, MCP, …), Files-API inputs, `item_reference` and reasoning items
 * are refused by these schemas (400 naming the field) rather than dropped, so a client
 * never believes a request was honoured that was not.
 *
 * As in chat.ts, the request is a loose object so that an unknown top-level key
 * survives parsing and the edge can refuse it by name (RESPONSES_REQUEST_FIELDS).
 * Items and content parts are plain objects: keys OpenAI adds to them (`annotations`,
 * `logprobs`, `phase`, `prompt_cache_breakpoint`, …) are dropped, not refused, because
 * the translation builds the engine's messages from the named fields only, and
 * clients replay output items with those keys in them.
 */

const nullableOptional = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const ItemStatus = z.enum(["in_progress", "completed", "incomplete"]);

/**
 * A string where OpenAI also takes a list is shorthand for a one-element list, and is
 * parsed into one: a string-or-list union would name only the field when an element is
 * wrong (`input`), where the list alone names the element (`input.3.content.0.type`).
 */
const listOrText = <T extends z.ZodType>(list: T, fromText: (text: string) => unknown) =>
  z.preprocess((value) => (typeof value === "string" ? [fromText(value)] : value), list);

const listError = (what: string) => ({
  error: (issue: { code: string }) => (issue.code === "invalid_type" ? `Invalid input: expected a string or an array of ${what}` : undefined),
});

// ---------------------------------------------------------------- input content

export const InputTextPart = z.object({ type: z.literal("input_text"), text: z.string() });
/** An image by URL (https or data:). A Files-API `file_id` has no engine counterpart: without image_url it is refused. */
export const InputImagePart = z.object({
  type: z.literal("input_image"),
  image_url: z.string().min(1),
  detail: z.enum(["low", "high", "auto", "original"]).optional(),
});
/** An earlier answer's text, as clients replay it. */
export const OutputTextPart = z.object({ type: z.literal("output_text"), text: z.string() });
export const RefusalPart = z.object({ type: z.literal("refusal"), refusal: z.string() });

export const MessageContentPart = z.discriminatedUnion("type", [InputTextPart, InputImagePart, OutputTextPart, RefusalPart]);
export type MessageContentPart = z.infer<typeof MessageContentPart>;

// ---------------------------------------------------------------- input items

/**
 * A message of the conversation. Images belong to user messages and refusals to
 * assistant ones: chat completions has no place for them elsewhere.
 */
export const MessageItem = z
  .object({
    type: z.literal("message"),
    role: z.enum(["user", "assistant", "system", "developer"]),
    /** A string is one input_text part. */
    content: listOrText(z.array(MessageContentPart, listError("content parts")), (text) => ({ type: "input_text", text })),
    id: z.string().optional(),
    status: ItemStatus.optional(),
  })
  .superRefine((item, ctx) => {
    item.content.forEach((part, index) => {
      const misplaced =
        (part.type === "input_image" && item.role !== "user") || (part.type === "refusal" && item.role !== "assistant");
      if (misplaced) {
        ctx.addIssue({ code: "custom", path: ["content", index, "type"], message: `${part.type} is not allowed in a ${item.role} message` });
      }
    });
  });
export type MessageItem = z.infer<typeof MessageItem>;

export const FunctionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
  id: z.string().optional(),
  status: ItemStatus.optional(),
});
export type FunctionCallItem = z.infer<typeof FunctionCallItem>;

export const FunctionCallOutputItem = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  /** A chat tool message carries text only: images or files in a tool's output are refused. */
  output: z.union([z.string(), z.array(InputTextPart)]),
  id: nullableOptional(z.string()),
  status: nullableOptional(ItemStatus),
});
export type FunctionCallOutputItem = z.infer<typeof FunctionCallOutputItem>;

/**
 * One item of `input`, or of a stored conversation. OpenAI's "easy" message omits
 * `type`; it is filled in before the union is chosen so that an unknown type is
 * refused by name (`input.N.type`) rather than as "matches no option".
 */
export const InputItem = z.preprocess(
  (value) =>
    typeof value === "object" && value !== null && !Array.isArray(value) && !("type" in value) ? { ...value, type: "message" } : value,
  z.discriminatedUnion("type", [MessageItem, FunctionCallItem, FunctionCallOutputItem]),
);
export type InputItem = z.infer<typeof InputItem>;

// ---------------------------------------------------------------- request

export const FunctionTool = z.object({
  type: z.literal("function"),
  name: z.string().min(1),
  description: nullableOptional(z.string()),
  parameters: nullableOptional(z.record(z.string(), z.unknown())),
  strict: nullableOptional(z.boolean()),
});
export type FunctionTool = z.infer<typeof FunctionTool>;

/** `allowed_tools` and hosted-tool choices name tools no engine has: refused. */
export const ToolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), name: z.string().min(1) }),
]);
export type ToolChoice = z.infer<typeof ToolChoice>;

export const TextFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().min(1).max(64),
    schema: z.record(z.string(), z.unknown()),
    description: z.string().optional(),
    strict: nullableOptional(z.boolean()),
  }),
]);
export type TextFormat = z.infer<typeof TextFormat>;

export const TextConfig = z.object({
  format: TextFormat.optional(),
  /** Accepted, not forwarded: no engine reads a verbosity. */
  verbosity: nullableOptional(z.enum(["low", "medium", "high"])),
});
export type TextConfig = z.infer<typeof TextConfig>;

/** Only `effort` is forwarded (as chat's reasoning_effort); summaries are accepted and not produced. */
export const ReasoningConfig = z.object({
  effort: nullableOptional(z.enum(["none", "minimal", "low", "medium", "high", "xhigh", "max"])),
  summary: nullableOptional(z.enum(["auto", "concise", "detailed"])),
  generate_summary: nullableOptional(z.enum(["auto", "concise", "detailed"])),
});
export type ReasoningConfig = z.infer<typeof ReasoningConfig>;

export const ResponsesRequest = z.looseObject({
  model: z.string().min(1),
  /** A string is one user message. */
  input: listOrText(z.array(InputItem, listError("items")).min(1), (text) => ({ type: "message", role: "user", content: text })),
  instructions: nullableOptional(z.string()),
  tools: z.array(FunctionTool).optional(),
  tool_choice: ToolChoice.optional(),
  max_output_tokens: nullableOptional(z.int().positive()),
  temperature: nullableOptional(z.number().min(0).max(2)),
  top_p: nullableOptional(z.number().min(0).max(1)),
  stream: nullableOptional(z.boolean()),
  /** Resolved by the caller into the earlier conversation's items (responsesToChatRequest's `history`). */
  previous_response_id: nullableOptional(z.string().min(1)),
  /** Whether the response may be continued by a later previous_response_id (OpenAI's default: true). */
  store: nullableOptional(z.boolean()),
  /** OpenAI's: ≤ 16 pairs, keys ≤ 64 chars, values ≤ 512. Echoed in the response; engines never see it. */
  metadata: nullableOptional(z.record(z.string().max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, "at most 16 pairs")),
  user: z.string().optional(),
  prompt_cache_key: nullableOptional(z.string()),
  parallel_tool_calls: nullableOptional(z.boolean()),
  text: TextConfig.optional(),
  reasoning: nullableOptional(ReasoningConfig),
  /**
   * What else the answer should carry (Codex asks for reasoning.encrypted_content):
   * accepted so such clients work unchanged; the translated answer has no reasoning
   * items or logprobs to include.
   */
  include: nullableOptional(z.array(z.string().min(1).max(100)).max(16)),
  /** Accepted and ignored: a context longer than the engine's is refused by the engine, not truncated. */
  truncation: nullableOptional(z.enum(["auto", "disabled"])),
  /** Accepted and ignored: Agentix has one tier. */
  service_tier: nullableOptional(z.string().max(32)),
  /** OpenAI's end-user identifier for abuse monitoring: accepted, not forwarded. */
  safety_identifier: nullableOptional(z.string().max(256)),
  stream_options: nullableOptional(z.looseObject({ include_obfuscation: nullableOptional(z.boolean()) })),
});
export type ResponsesRequest = z.infer<typeof ResponsesRequest>;

/** The request's own top-level fields: an edge refuses any other key with 400 (`unsupported_parameter`). */
export const RESPONSES_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ResponsesRequest.shape));

/** The top-level keys of a parsed request that RESPONSES_REQUEST_FIELDS does not name, in the request's order. */
export function unknownResponsesFields(request: object): string[] {
  return Object.keys(request).filter((key) => !RESPONSES_REQUEST_FIELDS.has(key));
}

// ---------------------------------------------------------------- response

/** Agentix has no file search or web search, so text never carries citations. */
export const OutputTextContent = z.object({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(z.never()),
});
export type OutputTextContent = z.infer<typeof OutputTextContent>;

export const OutputMessage = z.object({
  id: z.string().startsWith("msg_"),
  type: z.literal("message"),
  role: z.literal("assistant"),
  status: ItemStatus,
  content: z.array(OutputTextContent),
});
export type OutputMessage = z.infer<typeof OutputMessage>;

export const OutputFunctionCall = z.object({
  id: z.string().startsWith("fc_"),
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: ItemStatus,
});
export type OutputFunctionCall = z.infer<typeof OutputFunctionCall>;

export const OutputItem = z.discriminatedUnion("type", [OutputMessage, OutputFunctionCall]);
export type OutputItem = z.infer<typeof OutputItem>;

/**
 * Responses' usage: cached tokens are part of input_tokens, as in chat's usage.
 * `cache_write_tokens` is in the SDK's type but no engine reports cache writes: always
 * 0. The details default when absent: vLLM's native answer has no cache_write_tokens,
 * and its usage must still be read (it is what the call is billed by).
 */
export const ResponseUsage = z.object({
  input_tokens: z.int().nonnegative(),
  input_tokens_details: z
    .object({ cached_tokens: z.int().nonnegative().default(0), cache_write_tokens: z.int().nonnegative().default(0) })
    .default({ cached_tokens: 0, cache_write_tokens: 0 }),
  output_tokens: z.int().nonnegative(),
  output_tokens_details: z.object({ reasoning_tokens: z.int().nonnegative().default(0) }).default({ reasoning_tokens: 0 }),
  total_tokens: z.int().nonnegative(),
});
export type ResponseUsage = z.infer<typeof ResponseUsage>;

export const ResponseStatus = z.enum(["in_progress", "completed", "incomplete", "failed"]);
export type ResponseStatus = z.infer<typeof ResponseStatus>;

/** A tool as the response echoes it: OpenAI always names parameters and strict, null when unset. */
export const EchoedFunctionTool = z.object({
  type: z.literal("function"),
  name: z.string(),
  description: nullableOptional(z.string()),
  parameters: z.record(z.string(), z.unknown()).nullable(),
  strict: z.boolean().nullable(),
});

/**
 * The response object. The request's settings are echoed as OpenAI does (null when
 * unset). `output_text` is the SDKs' convenience (all output text joined); OpenAI's
 * wire object lacks it, but the SDKs recompute it anyway and a raw HTTP client gets it
 * for free.
 */
export const ResponseObject = z.object({
  id: z.string().startsWith("resp_"),
  object: z.literal("response"),
  created_at: z.number(),
  status: ResponseStatus,
  model: z.string(),
  output: z.array(OutputItem),
  output_text: z.string(),
  /** Set when status is failed. ResponseError's codes are OpenAI's list; Agentix's failures are all server_error. */
  error: z.object({ code: z.literal("server_error"), message: z.string() }).nullable(),
  incomplete_details: z.object({ reason: z.enum(["max_output_tokens", "content_filter"]) }).nullable(),
  instructions: z.string().nullable(),
  metadata: z.record(z.string(), z.string()).nullable(),
  parallel_tool_calls: z.boolean(),
  temperature: z.number().nullable(),
  top_p: z.number().nullable(),
  tool_choice: ToolChoice,
  tools: z.array(EchoedFunctionTool),
  max_output_tokens: z.int().positive().nullable(),
  previous_response_id: z.string().nullable(),
  prompt_cache_key: z.string().nullable(),
  reasoning: ReasoningConfig.nullable(),
  text: TextConfig,
  /** Agentix never truncates a conversation to fit: an over-long one is the engine's 400. */
  truncation: z.literal("disabled"),
  background: z.literal(false),
  usage: ResponseUsage.optional(),
  user: z.string().optional(),
});
export type ResponseObject = z.infer<typeof ResponseObject>;

// ---------------------------------------------------------------- streaming events

const sequence_number = z.int().nonnegative();
const output_index = z.int().nonnegative();
const content_index = z.int().nonnegative();
/** Logprobs are never asked of the engine (no `include` field), so they are always empty. */
const logprobs = z.array(z.never());

const lifecycle = <T extends string>(type: T) => z.object({ type: z.literal(type), sequence_number, response: ResponseObject });

export const ResponseCreatedEvent = lifecycle("response.created");
export const ResponseInProgressEvent = lifecycle("response.in_progress");
export const ResponseCompletedEvent = lifecycle("response.completed");
export const ResponseIncompleteEvent = lifecycle("response.incomplete");
export const ResponseFailedEvent = lifecycle("response.failed");

export const OutputItemAddedEvent = z.object({ type: z.literal("response.output_item.added"), sequence_number, output_index, item: OutputItem });
export const OutputItemDoneEvent = z.object({ type: z.literal("response.output_item.done"), sequence_number, output_index, item: OutputItem });

const partEvent = <T extends string>(type: T) =>
  z.object({ type: z.literal(type), sequence_number, item_id: z.string(), output_index, content_index, part: OutputTextContent });
export const ContentPartAddedEvent = partEvent("response.content_part.added");
export const ContentPartDoneEvent = partEvent("response.content_part.done");

export const OutputTextDeltaEvent = z.object({
  type: z.literal("response.output_text.delta"),
  sequence_number,
  item_id: z.string(),
  output_index,
  content_index,
  delta: z.string(),
  logprobs,
});
export const OutputTextDoneEvent = z.object({
  type: z.literal("response.output_text.done"),
  sequence_number,
  item_id: z.string(),
  output_index,
  content_index,
  text: z.string(),
  logprobs,
});

export const FunctionCallArgumentsDeltaEvent = z.object({
  type: z.literal("response.function_call_arguments.delta"),
  sequence_number,
  item_id: z.string(),
  output_index,
  delta: z.string(),
});
export const FunctionCallArgumentsDoneEvent = z.object({
  type: z.literal("response.function_call_arguments.done"),
  sequence_number,
  item_id: z.string(),
  output_index,
  name: z.string(),
  arguments: z.string(),
});

/** A stream's error before any response existed (afterwards a failure is response.failed). */
export const ResponseErrorEvent = z.object({
  type: z.literal("error"),
  sequence_number,
  code: z.string().nullable(),
  message: z.string(),
  param: z.string().nullable(),
});

export const ResponseStreamEvent = z.discriminatedUnion("type", [
  ResponseCreatedEvent,
  ResponseInProgressEvent,
  ResponseCompletedEvent,
  ResponseIncompleteEvent,
  ResponseFailedEvent,
  OutputItemAddedEvent,
  OutputItemDoneEvent,
  ContentPartAddedEvent,
  ContentPartDoneEvent,
  OutputTextDeltaEvent,
  OutputTextDoneEvent,
  FunctionCallArgumentsDeltaEvent,
  FunctionCallArgumentsDoneEvent,
  ResponseErrorEvent,
]);
export type ResponseStreamEvent = z.infer<typeof ResponseStreamEvent>;

/** Serialises one event as OpenAI sends it: the event name repeats the payload's type; no `[DONE]` ends the stream. */
export function formatResponsesEvent(event: ResponseStreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}
