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

/** The usage vLLM puts on every chunk under `continuous_usage_stats`: counts so far, no details. */
export interface ChunkUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export function chunkUsage(promptTokens: number, completionTokens: number): ChunkUsage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

export function wireUsage(usage: RequestUsage): WireUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
  };
}

/**
 * Stream chunks take the usage so far when the request asked for continuous usage
 * (vLLM: the role chunk with 0 completion tokens, each token chunk and the finish
 * chunk with the count up to it).
 */
export interface ResponseFormat {
  /** Chunks sent before the first token (chat: the assistant role). */
  openingChunks(usage?: ChunkUsage): unknown[];
  tokenChunk(text: string, usage?: ChunkUsage): unknown;
  finalChunk(reason: FinishReason, usage?: ChunkUsage): unknown;
  /** The extra chunk of stream_options.include_usage: no choices, only usage. */
  usageChunk(usage: RequestUsage): unknown;
  /** The whole non-streaming response. */
  completeBody(text: string, reason: FinishReason, usage: RequestUsage): unknown;
}

const usageField = (usage: ChunkUsage | undefined): Record<string, unknown> => (usage === undefined ? {} : { usage });

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
    openingChunks: (usage) => [
      chunk([{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }], usageField(usage)),
    ],
    tokenChunk: (text, usage) => chunk([{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }], usageField(usage)),
    finalChunk: (reason, usage) =>
      chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: reason, stop_reason: null }], usageField(usage)),
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
    tokenChunk: (text, usage) => chunk([{ index: 0, text, logprobs: null, finish_reason: null, stop_reason: null }], usageField(usage)),
    finalChunk: (reason, usage) =>
      chunk([{ index: 0, text: "", logprobs: null, finish_reason: reason, stop_reason: null }], usageField(usage)),
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
