import type { Usage } from "../../protocol/chat.js";
import type { OpenAIErrorBody } from "../../protocol/errors.js";
import { formatMessagesEvent, messagesErrorBody, MessagesUsage } from "../../protocol/messages.js";
import { eventData } from "../../protocol/sse.js";
import { type PoolCallStats, parseStatsEvent } from "../../protocol/stats.js";
import type { StreamRelayFilter } from "./sse-filter.js";

/** Anthropic's usage in chat's terms: cached tokens are part of the prompt there, beside it here. */
export function chatUsageOfMessages(usage: MessagesUsage): Usage {
  const cached = usage.cache_read_input_tokens ?? 0;
  const prompt = usage.input_tokens + cached + (usage.cache_creation_input_tokens ?? 0);
  return {
    prompt_tokens: prompt,
    completion_tokens: usage.output_tokens,
    total_tokens: prompt + usage.output_tokens,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

type JsonRecord = Record<string, unknown>;
const isRecord = (value: unknown): value is JsonRecord => typeof value === "object" && value !== null && !Array.isArray(value);

function payloadOf(event: string): JsonRecord | undefined {
  const data = eventData(event);
  if (data === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(data);
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * An Anthropic Messages stream on its way to the client: everything passes but the
 * pool's stats comment. Usage comes from `message_start` (the input) and the
 * cumulative `message_delta` (the output); the stream's proper end is
 * `message_stop`. Content deltas count as output chunks, the estimate for a stream
 * cut before any usage arrived.
 */
export class MessagesStreamFilter implements StreamRelayFilter {
  usage: Usage | undefined;
  partialUsage: Usage | undefined;
  stats: PoolCallStats | undefined;
  outputChunks = 0;
  sawDone = false;
  #input: MessagesUsage | undefined;

  /** Anthropic's `event: error` (its clients raise it as an APIError). */
  errorEvent(error: OpenAIErrorBody): string {
    return formatMessagesEvent(messagesErrorBody(502, error));
  }

  pass(event: string): string | undefined {
    const stats = parseStatsEvent(event);
    if (stats) {
      this.stats = stats;
      return undefined;
    }
    const payload = payloadOf(event);
    switch (payload?.type) {
      case "message_start": {
        const usage = MessagesUsage.safeParse(isRecord(payload.message) ? payload.message.usage : undefined);
        if (usage.success) {
          this.#input = usage.data;
          this.partialUsage = chatUsageOfMessages(usage.data);
        }
        break;
      }
      case "content_block_delta":
        this.outputChunks += 1;
        break;
      case "message_delta": {
        const delta = isRecord(payload.usage) ? payload.usage : {};
        if (typeof delta.output_tokens === "number") {
          const merged = MessagesUsage.safeParse({ ...this.#input, input_tokens: this.#input?.input_tokens ?? 0, ...delta });
          if (merged.success) this.usage = chatUsageOfMessages(merged.data);
        }
        break;
      }
      case "message_stop":
        this.sawDone = true;
        break;
    }
    return event;
  }
}
