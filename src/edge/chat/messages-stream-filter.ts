import type { Usage } from "../../protocol/chat.js";
import type { OpenAIErrorBody } from "../../protocol/errors.js";
import { formatMessagesEvent, messagesErrorBody, MessagesUsage } from "../../protocol/messages.js";
import { isJsonObject, type JsonObject } from "../../protocol/json.js";
import { eventObject } from "../../protocol/sse.js";
import { type PoolCallStats, parseStatsEvent } from "../../protocol/stats.js";
import { MAX_REPLY_CHARS, messagesBlocksReply } from "../recognition/replies.js";
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
  readonly #blocks = new Map<number, { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; json: string }>();
  #replyChars = 0;

  /** The assistant turn the stream carried, canonical as its client will replay it; undefined past MAX_REPLY_CHARS. */
  get reply(): string | undefined {
    if (this.#replyChars > MAX_REPLY_CHARS) return undefined;
    const content = [...this.#blocks.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, block]) => {
        if (block.type === "text") return { type: "text" as const, text: block.text };
        let input: Record<string, unknown> = {};
        try {
          const parsed: unknown = JSON.parse(block.json || "{}");
          if (isJsonObject(parsed)) input = parsed;
        } catch {
          // A cut tool call links nothing useful; its empty input still hashes consistently.
        }
        return { type: "tool_use" as const, id: block.id, name: block.name, input };
      });
    return messagesBlocksReply(content);
  }

  #collect(payload: JsonObject): void {
    const index = typeof payload.index === "number" ? payload.index : -1;
    if (payload.type === "content_block_start" && isJsonObject(payload.content_block)) {
      const block = payload.content_block;
      if (block.type === "text") this.#blocks.set(index, { type: "text", text: typeof block.text === "string" ? block.text : "" });
      if (block.type === "tool_use") {
        this.#blocks.set(index, { type: "tool_use", id: String(block.id ?? ""), name: String(block.name ?? ""), json: "" });
      }
      return;
    }
    const delta = isJsonObject(payload.delta) ? payload.delta : {};
    const block = this.#blocks.get(index);
    if (block?.type === "text" && typeof delta.text === "string") {
      block.text += delta.text;
      this.#replyChars += delta.text.length;
    }
    if (block?.type === "tool_use" && typeof delta.partial_json === "string") {
      block.json += delta.partial_json;
      this.#replyChars += delta.partial_json.length;
    }
  }

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
    const payload = eventObject(event);
    switch (payload?.type) {
      case "message_start": {
        const usage = MessagesUsage.safeParse(isJsonObject(payload.message) ? payload.message.usage : undefined);
        if (usage.success) {
          this.#input = usage.data;
          this.partialUsage = chatUsageOfMessages(usage.data);
        }
        break;
      }
      case "content_block_start":
        this.#collect(payload);
        break;
      case "content_block_delta":
        this.outputChunks += 1;
        this.#collect(payload);
        break;
      case "message_delta": {
        const delta = isJsonObject(payload.usage) ? payload.usage : {};
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
