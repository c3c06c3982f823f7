import type { FinishReason } from "./sequence.js";
import type { RequestUsage } from "./engine-model.js";

/*
 * Response bodies and stream chunks in the shapes vLLM's OpenAI server writes, for
 * chat completions and legacy completions. One object per request holds the id,
 * creation time and model name that every chunk repeats.
 */

export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function wireUsage(usage: RequestUsage): WireUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
  };
}

export interface ResponseFormat {
  /** Chunks sent before the first token (chat: the assistant role). */
  openingChunks(): unknown[];
  tokenChunk(text: string): unknown;
  finalChunk(reason: FinishReason): unknown;
  /** The extra chunk of stream_options.include_usage: no choices, only usage. */
  usageChunk(usage: RequestUsage): unknown;
  /** The whole non-streaming response. */
  completeBody(text: string, reason: FinishReason, usage: RequestUsage): unknown;
}

interface Identity {
  id: string;
  created: number;
  model: string;
}

export function chatFormat({ id, created, model }: Identity): ResponseFormat {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices,
    ...extra,
  });
  return {
    openingChunks: () => [
      chunk([{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }]),
    ],
    tokenChunk: (text) => chunk([{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }]),
    finalChunk: (reason) => chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: reason, stop_reason: null }]),
    usageChunk: (usage) => chunk([], { usage: wireUsage(usage) }),
    completeBody: (text, reason, usage) => ({
      id,
      object: "chat.completion",
      created,
      model,
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: text, tool_calls: [] },
          logprobs: null,
          finish_reason: reason,
          stop_reason: null,
        },
      ],
      usage: wireUsage(usage),
    }),
  };
}

export function completionFormat({ id, created, model }: Identity): ResponseFormat {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id,
    object: "text_completion",
    created,
    model,
    choices,
    ...extra,
  });
  return {
    openingChunks: () => [],
    tokenChunk: (text) => chunk([{ index: 0, text, logprobs: null, finish_reason: null, stop_reason: null }]),
    finalChunk: (reason) => chunk([{ index: 0, text: "", logprobs: null, finish_reason: reason, stop_reason: null }]),
    usageChunk: (usage) => chunk([], { usage: wireUsage(usage) }),
    completeBody: (text, reason, usage) => ({
      id,
      object: "text_completion",
      created,
      model,
      choices: [{ index: 0, text, logprobs: null, finish_reason: reason, stop_reason: null }],
      usage: wireUsage(usage),
    }),
  };
}
