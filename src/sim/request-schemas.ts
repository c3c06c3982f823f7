import { z } from "zod";
import { ChatCompletionRequest } from "../protocol/chat.js";
import { KV_RETENTION_TAG_FIELD, KvRetentionTag } from "../protocol/kv-retention.js";
import { KvTransferParams } from "../protocol/kv-transfer.js";

/*
 * What the simulated engine accepts beyond the shared OpenAI subset: vLLM's
 * sampling extras, and the legacy completions request (prompt string only).
 */

/**
 * vLLM's stream options: `continuous_usage_stats` (with `include_usage`) puts the
 * usage so far on every chunk.
 */
const StreamOptions = z.looseObject({
  include_usage: z.boolean().nullish(),
  continuous_usage_stats: z.boolean().nullish(),
});

const VllmExtras = {
  stream_options: StreamOptions.nullish(),
  /** vLLM: lower runs first; only allowed with priority scheduling. */
  priority: z.int().nullish(),
  min_tokens: z.int().nonnegative().nullish(),
  ignore_eos: z.boolean().nullish(),
  /** Agentix's retention tag: the context this call's KV belongs to (src/protocol/kv-retention.ts). */
  [KV_RETENTION_TAG_FIELD]: KvRetentionTag.nullish(),
  /** vLLM's KV connector fields (protocol/kv-transfer.ts): a disaggregated call's prefill or decode (kv-handoff.ts). */
  kv_transfer_params: KvTransferParams.nullish(),
};

export const SimChatRequest = ChatCompletionRequest.extend(VllmExtras);
export type SimChatRequest = z.infer<typeof SimChatRequest>;

export const SimCompletionRequest = z.looseObject({
  model: z.string().min(1),
  prompt: z.union([z.string(), z.tuple([z.string()])]),
  stream: z.boolean().nullish(),
  /** vLLM and OpenAI default to 16 for legacy completions. */
  max_tokens: z.int().positive().nullish(),
  n: z.literal(1).nullish(),
  ...VllmExtras,
});
export type SimCompletionRequest = z.infer<typeof SimCompletionRequest>;

/** The completions default budget (vLLM's CompletionRequest.max_tokens). */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

/** vLLM's TokenizeChatRequest: the chat messages (and tools) its template renders; the rest of its fields are not read here. */
export const SimTokenizeRequest = z.looseObject({
  model: z.string().min(1),
  messages: ChatCompletionRequest.shape.messages,
  tools: ChatCompletionRequest.shape.tools,
  add_generation_prompt: z.boolean().optional(),
});
