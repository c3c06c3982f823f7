import { z } from "zod";
import type { ChatCompletionRequest } from "./chat.js";

/*
 * OpenAI's legacy completions API (`POST /v1/completions`) as Agentix accepts it: one
 * prompt (a string, a one-string array, or token IDs), one choice. vLLM, SGLang and
 * OpenAI-compatible servers serve it natively, so the pool forwards it as is. Loose on
 * the wire for the same reason as chat.ts; the edge refuses keys outside
 * COMPLETION_REQUEST_FIELDS (plus the plan's extensions).
 */

const nullableOptional = <T extends z.ZodType>(schema: T) => schema.nullable().optional();

export const CompletionPrompt = z.union([
  z.string(),
  z.tuple([z.string()]),
  z.array(z.int().nonnegative()).min(1),
]);
export type CompletionPrompt = z.infer<typeof CompletionPrompt>;

export const CompletionRequest = z.looseObject({
  model: z.string().min(1),
  prompt: CompletionPrompt,
  suffix: nullableOptional(z.string()),
  stream: nullableOptional(z.boolean()),
  stream_options: nullableOptional(z.strictObject({ include_usage: nullableOptional(z.boolean()) })),
  /** OpenAI's default is 16; without one, the edge sets the plan's default (its reservation). */
  max_tokens: nullableOptional(z.int().positive()),
  temperature: nullableOptional(z.number().min(0).max(2)),
  top_p: nullableOptional(z.number().min(0).max(1)),
  n: nullableOptional(z.literal(1)),
  best_of: nullableOptional(z.literal(1)),
  stop: nullableOptional(z.union([z.string(), z.array(z.string()).max(4)])),
  seed: nullableOptional(z.int()),
  frequency_penalty: nullableOptional(z.number().min(-2).max(2)),
  presence_penalty: nullableOptional(z.number().min(-2).max(2)),
  logit_bias: nullableOptional(z.record(z.string().regex(/^\d+$/, "must be a token ID"), z.number().min(-100).max(100))),
  logprobs: nullableOptional(z.int().min(0).max(5)),
  echo: nullableOptional(z.boolean()),
  user: z.string().optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

/** The request's own top-level fields: anything else is an extension (refused unless the plan allows it). */
export const COMPLETION_REQUEST_FIELDS: ReadonlySet<string> = new Set(Object.keys(CompletionRequest.shape));

export const TextCompletion = z.looseObject({
  id: z.string(),
  object: z.literal("text_completion"),
  created: z.number(),
  model: z.string(),
  choices: z.array(z.looseObject({ index: z.number(), text: z.string().optional() })),
});

/**
 * The prompt as text. Token IDs are written out in decimal: distinct prompts stay
 * distinct for the prefix index, and the token estimate runs high (the edge settles
 * on the engine's usage, never on this).
 */
export function completionPromptText(prompt: CompletionPrompt): string {
  if (typeof prompt === "string") return prompt;
  if (typeof prompt[0] === "string") return prompt[0];
  return prompt.map((id) => String(id)).join(" ");
}

/**
 * The completion request as the pool's scheduler reads a call (model, prompt for its
 * prefix index and token estimate, limit, stream): one user message holding the prompt.
 * The engine still receives the completion request itself.
 */
export function completionSchedulingView(req: CompletionRequest): ChatCompletionRequest {
  return {
    model: req.model,
    messages: [{ role: "user", content: completionPromptText(req.prompt) }],
    ...(req.max_tokens !== undefined ? { max_tokens: req.max_tokens } : {}),
    ...(req.stream !== undefined ? { stream: req.stream } : {}),
  };
}
