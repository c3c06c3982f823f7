import { z } from "zod";

/*
 * The subset of OpenAI's chat-completions API that Agentix accepts: the single
 * source of truth for its fields. The objects are loose ON THE WIRE (the pool
 * parses the edge's forwarded body with these schemas and must accept the engine
 * extensions a tenant's plan allows), but the edge forwards only what these shapes
 * name (plus the plan's extensions): it refuses any other key of the request or of
 * a message with 400 (REQUEST_FIELDS, MESSAGE_FIELDS, edge/chat/forward-body.ts).
 * Content parts, tool definitions and tool calls stay loose: their keys are
 * OpenAI's typed unions (image_url, input_audio, file, strict, …), not engine knobs.
 */

const ContentPart = z.looseObject({ type: z.string() });

export const ToolCall = z.looseObject({
  id: z.string(),
  type: z.string(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCall>;

/** A tool call's fragment in a streamed chunk (`choices[].delta.tool_calls[]`): an index, then name and arguments in pieces. */
export const ToolCallDelta = z.looseObject({
  index: z.int().nonnegative(),
  id: z.string().nullish(),
  function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
});
export type ToolCallDelta = z.infer<typeof ToolCallDelta>;

export const ChatMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  name: z.string().optional(),
  tool_calls: z.array(ToolCall).optional(),
  tool_call_id: z.string().optional(),
  /** An assistant message's refusal, replayed in the conversation. */
  refusal: z.string().nullable().optional(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

export const ToolDefinition = z.looseObject({
  type: z.string(),
  function: z
    .looseObject({
      name: z.string().min(1),
      description: z.string().optional(),
      parameters: z.record(z.string(), z.unknown()).optional(),
    })
    .optional(),
});

const nullableOptional = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const ChatCompletionRequest = z.looseObject({
  model: z.string().min(1),
  messages: z.array(ChatMessage).min(1),
  stream: nullableOptional(z.boolean()),
  stream_options: nullableOptional(
    z.strictObject({ include_usage: nullableOptional(z.boolean()), include_obfuscation: nullableOptional(z.boolean()) }),
  ),
  max_tokens: nullableOptional(z.int().positive()),
  max_completion_tokens: nullableOptional(z.int().positive()),
  temperature: nullableOptional(z.number().min(0).max(2)),
  top_p: nullableOptional(z.number().min(0).max(1)),
  n: nullableOptional(z.literal(1)),
  stop: nullableOptional(z.union([z.string(), z.array(z.string()).max(4)])),
  seed: nullableOptional(z.int()),
  frequency_penalty: nullableOptional(z.number().min(-2).max(2)),
  presence_penalty: nullableOptional(z.number().min(-2).max(2)),
  logit_bias: nullableOptional(z.record(z.string().regex(/^\d+$/, "must be a token ID"), z.number().min(-100).max(100))),
  logprobs: nullableOptional(z.boolean()),
  top_logprobs: nullableOptional(z.int().min(0).max(20)),
  response_format: nullableOptional(z.looseObject({ type: z.string().min(1) })),
  reasoning_effort: nullableOptional(z.string().min(1).max(32)),
  tools: z.array(ToolDefinition).optional(),
  tool_choice: z.union([z.string(), z.looseObject({ type: z.string() })]).optional(),
  parallel_tool_calls: z.boolean().optional(),
  user: z.string().optional(),
  /** OpenAI's: ≤ 16 pairs, keys ≤ 64 chars, values ≤ 512. Forwarded; engines ignore it. */
  metadata: nullableOptional(z.record(z.string().max(64), z.string().max(512)).refine((m) => Object.keys(m).length <= 16, "at most 16 pairs")),
  /**
   * OpenAI's key for prompt-cache routing, set per conversation by clients that use it:
   * the edge takes it as the call's session key (programs without a header) and does not
   * forward it (engines cache by prefix, not by key).
   */
  prompt_cache_key: nullableOptional(z.string().max(1024)),
  /** OpenAI's: whether OpenAI stores the completion. Accepted so OpenAI clients work; Agentix stores no completions. */
  store: nullableOptional(z.boolean()),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

export const Usage = z.looseObject({
  prompt_tokens: z.int().nonnegative(),
  completion_tokens: z.int().nonnegative(),
  total_tokens: z.int().nonnegative(),
  prompt_tokens_details: nullableOptional(
    z.looseObject({ cached_tokens: nullableOptional(z.int().nonnegative()) }),
  ),
});
export type Usage = z.infer<typeof Usage>;

export const ChatCompletion = z.looseObject({
  id: z.string(),
  object: z.literal("chat.completion"),
  created: z.number(),
  model: z.string(),
  choices: z.array(z.looseObject({ index: z.number() })),
  usage: nullableOptional(Usage),
});
export type ChatCompletion = z.infer<typeof ChatCompletion>;

export const ChatCompletionChunk = z.looseObject({
  id: z.string(),
  object: z.literal("chat.completion.chunk"),
  created: z.number(),
  model: z.string(),
  choices: z.array(z.looseObject({ index: z.number() })),
  usage: nullableOptional(Usage),
});
export type ChatCompletionChunk = z.infer<typeof ChatCompletionChunk>;

/** The request's own top-level fields: anything else is an extension (refused unless the plan allows it). */
export const REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(ChatCompletionRequest.shape));
/** A message's own fields: anything else in a message is refused unless the plan allows `messages.<key>`. */
export const MESSAGE_FIELDS: ReadonlySet<string> = new Set(Object.keys(ChatMessage.shape));
/** Prefix of an allowed extension that names a message field rather than a request field. */
export const MESSAGE_EXTENSION_PREFIX = "messages.";

export type MaxTokensField = "max_completion_tokens" | "max_tokens";

/** The completion budget a request asks for, whichever of the two names it used. */
export function requestedMaxTokens(req: ChatCompletionRequest): number | undefined {
  return req.max_completion_tokens ?? req.max_tokens ?? undefined;
}

/** The field that carries the request's completion limit (max_completion_tokens wins, as in requestedMaxTokens). */
export function maxTokensField(req: ChatCompletionRequest): MaxTokensField {
  if (req.max_completion_tokens !== undefined && req.max_completion_tokens !== null) return "max_completion_tokens";
  return "max_tokens";
}

/** Token counts of a usage object, cached tokens defaulting to zero. */
export function usageCounts(usage: Usage): { prompt: number; cached: number; completion: number } {
  return {
    prompt: usage.prompt_tokens,
    cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
    completion: usage.completion_tokens,
  };
}
