import { z } from "zod";
import { Usage } from "../../protocol/chat.js";
import type { OpenAIErrorBody } from "../../protocol/errors.js";
import { canonicalMessage } from "../../core/recognition/conversation-index.js";
import { MAX_REPLY_CHARS } from "../recognition/replies.js";
import { eventData, isDoneEvent } from "../../protocol/sse.js";
import { type PoolCallStats, parseStatsEvent } from "../../protocol/stats.js";

/**
 * What the relays need of any API's stream filter: the event to pass on (or not), and
 * what the edge learned for settling the call.
 */
export interface StreamRelayFilter {
  pass(event: string): string | undefined;
  /** The engine's whole count, from the stream's final usage. */
  readonly usage: Usage | undefined;
  /** The engine's count up to the last event relayed (a stream cut short). */
  readonly partialUsage: Usage | undefined;
  readonly stats: PoolCallStats | undefined;
  /** Events relayed that carried generated output: the completion-token estimate if the stream is cut. */
  readonly outputChunks: number;
  /** The stream's own proper end arrived (`data: [DONE]` for OpenAI's APIs). */
  readonly sawDone: boolean;
  /** The whole answer the stream ended with, for APIs whose last event carries it (Responses). */
  readonly answer?: unknown;
  /** The reply the stream carried, canonical (recognition/replies.ts), once it ended; undefined when unknown or too long (or, with `answer`, read from that). */
  readonly reply?: string | undefined;
  /** The event that tells a client still reading why the stream stops, in the API's shape; absent: OpenAI's `data: {error}`. */
  errorEvent?(error: OpenAIErrorBody): string;
}

/**
 * Just what the edge reads from a chunk; anything else in it is relayed untouched.
 * Chat chunks carry output in `choices[].delta`, completions chunks in `choices[].text`.
 */
const ChunkView = z.looseObject({
  choices: z
    .array(
      z.looseObject({
        text: z.string().nullish(),
        delta: z
          .looseObject({
            content: z.string().nullish(),
            reasoning_content: z.string().nullish(),
            tool_calls: z
              .array(
                z.looseObject({
                  index: z.number().optional(),
                  function: z.looseObject({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
                }),
              )
              .nullish(),
          })
          .nullish(),
      }),
    )
    .optional(),
  usage: Usage.nullish(),
});
type ChunkView = z.infer<typeof ChunkView>;

function carriesOutput(chunk: ChunkView): boolean {
  return (chunk.choices ?? []).some(({ delta, text }) =>
    Boolean(text || delta?.content || delta?.reasoning_content || (delta?.tool_calls && delta.tool_calls.length > 0)),
  );
}

function readChunk(data: string): ChunkView | undefined {
  try {
    const parsed = ChunkView.safeParse(JSON.parse(data));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * For OpenAI's chat completions and completions streams (same framing: chunks, a
 * usage-only chunk, `data: [DONE]`).
 *
 * Decides, event by event, what of the pool's stream reaches the client, and
 * remembers what the edge needs to settle the call: the pool's stats comment is
 * taken out, the usage-only chunk is kept only if the client asked for it
 * (stream_options.include_usage; the pool always asks the engine for usage),
 * and everything else (chunks, other comments, `data: [DONE]`) passes unchanged.
 *
 * Engines that report usage on every chunk (the pool asks vLLM and SGLang for
 * `continuous_usage_stats`) give the edge the engine's own count up to the last
 * chunk it relayed, so a stream the client abandons is still billed what the
 * engine reported. That per-chunk usage is the edge's, not the client's: it is
 * taken out of output chunks (null, as OpenAI sends, when the client asked for
 * usage) before they are relayed.
 */
export class SseRelayFilter implements StreamRelayFilter {
  /** The final usage chunk's figures: the engine's whole count. */
  usage: Usage | undefined;
  /** The latest per-chunk usage: the engine's count up to the last chunk relayed. */
  partialUsage: Usage | undefined;
  stats: PoolCallStats | undefined;
  /** Chunks relayed that carried generated output: the completion-token estimate if the stream is cut. */
  outputChunks = 0;
  sawDone = false;
  #replyText = "";
  readonly #replyCalls = new Map<number, { name: string; args: string }>();
  #replyChars = 0;

  constructor(private readonly includeUsage: boolean) {}

  /** The assistant message the stream carried (text and tool calls), canonical; undefined past MAX_REPLY_CHARS. */
  get reply(): string | undefined {
    if (this.#replyChars > MAX_REPLY_CHARS) return undefined;
    const calls = [...this.#replyCalls.entries()].sort(([a], [b]) => a - b).map(([, c]) => ({ function: { name: c.name, arguments: c.args } }));
    return canonicalMessage({ role: "assistant", content: this.#replyText, ...(calls.length > 0 ? { tool_calls: calls } : {}) });
  }

  #collect(chunk: ChunkView): void {
    if (this.#replyChars > MAX_REPLY_CHARS) return;
    const choice = chunk.choices?.[0];
    const text = choice?.delta?.content ?? choice?.text ?? "";
    this.#replyText += text;
    this.#replyChars += text.length;
    for (const call of choice?.delta?.tool_calls ?? []) {
      const index = call.index ?? 0;
      const held = this.#replyCalls.get(index) ?? { name: "", args: "" };
      held.name += call.function?.name ?? "";
      held.args += call.function?.arguments ?? "";
      this.#replyChars += (call.function?.name ?? "").length + (call.function?.arguments ?? "").length;
      this.#replyCalls.set(index, held);
    }
  }

  /** The event to pass on, or undefined to drop it. */
  pass(event: string): string | undefined {
    const stats = parseStatsEvent(event);
    if (stats) {
      this.stats = stats;
      return undefined;
    }
    if (isDoneEvent(event)) {
      this.sawDone = true;
      return event;
    }
    const data = eventData(event);
    const chunk = data === undefined ? undefined : readChunk(data);
    if (!chunk) return event;
    if (carriesOutput(chunk)) {
      this.outputChunks += 1;
      this.#collect(chunk);
    }
    if (!chunk.usage) return event;
    if (chunk.choices === undefined || chunk.choices.length === 0) {
      this.usage = chunk.usage;
      return this.includeUsage ? event : undefined;
    }
    this.partialUsage = chunk.usage;
    return withoutUsage(data ?? "", this.includeUsage);
  }
}

/** The chunk re-serialised without its per-chunk usage (null when the client asked for usage, as OpenAI sends). */
function withoutUsage(data: string, includeUsage: boolean): string {
  const chunk = JSON.parse(data) as Record<string, unknown>;
  if (includeUsage) chunk.usage = null;
  else delete chunk.usage;
  return `data: ${JSON.stringify(chunk)}`;
}
