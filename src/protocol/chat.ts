import { z } from "zod";

/*
 * The subset of OpenAI's chat-completions API that Agentix reads. Every object is
 * loose: fields we do not know are kept and forwarded untouched to the engine.
 */

const ContentPart = z.looseObject({ type: z.string() });

export const ToolCall = z.looseObject({
  id: z.string(),
  type: z.string(),
  function: z.looseObject({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCall>;

export const ChatMessage = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool", "function"]),
  content: z.union([z.string(), z.array(ContentPart), z.null()]).optional(),
  name: z.string().optional(),
  tool_calls: z.array(ToolCall).optional(),
  tool_call_id: z.string().optional(),
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
  stream_options: nullableOptional(z.looseObject({ include_usage: z.boolean().optional() })),
  max_tokens: nullableOptional(z.int().positive()),
  max_completion_tokens: nullableOptional(z.int().positive()),
  temperature: nullableOptional(z.number().min(0).max(2)),
  top_p: nullableOptional(z.number().min(0).max(1)),
  n: nullableOptional(z.literal(1)),
  stop: nullableOptional(z.union([z.string(), z.array(z.string()).max(4)])),
  seed: nullableOptional(z.int()),
  tools: z.array(ToolDefinition).optional(),
  tool_choice: z.union([z.string(), z.looseObject({ type: z.string() })]).optional(),
  parallel_tool_calls: z.boolean().optional(),
  user: z.string().optional(),
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

/** The completion budget a request asks for, whichever of the two names it used. */
export function requestedMaxTokens(req: ChatCompletionRequest): number | undefined {
  return req.max_completion_tokens ?? req.max_tokens ?? undefined;
}

/** Token counts of a usage object, cached tokens defaulting to zero. */
export function usageCounts(usage: Usage): { prompt: number; cached: number; completion: number } {
  return {
    prompt: usage.prompt_tokens,
    cached: usage.prompt_tokens_details?.cached_tokens ?? 0,
    completion: usage.completion_tokens,
  };
}
