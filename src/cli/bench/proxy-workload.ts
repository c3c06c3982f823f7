import { z } from "zod";
import { ChatCompletion, ChatCompletionChunk } from "../../protocol/chat.js";
import { DONE_EVENT, eventData } from "../../protocol/sse.js";
import type { ProxyMode } from "./proxy-options.js";

/*
 * The one request every target gets (byte-identical body), and the checks that a
 * response is a real, complete completion: a proxy answering fast with an error
 * or a truncated stream must not count as a fast proxy.
 */

export interface ChatWorkload {
  model: string;
  mode: ProxyMode;
  maxTokens: number;
}

const MESSAGES = [
  { role: "system", content: "You are a coding agent. Answer with the next action only." },
  { role: "user", content: "The test suite fails in the parser module. Plan the next step." },
];

/** The JSON body, serialised once so every target receives the same bytes. */
export function chatRequestBody(workload: ChatWorkload): string {
  const streaming = workload.mode === "streaming";
  return JSON.stringify({
    model: workload.model,
    messages: MESSAGES,
    max_tokens: workload.maxTokens,
    // vLLM's extra: exactly max_tokens tokens, so streaming has several chunks.
    ignore_eos: true,
    stream: streaming,
    ...(streaming ? { stream_options: { include_usage: true } } : {}),
  });
}

/** What a response carried: the text and the usage the engine reported. */
export interface CompletionSummary {
  content: string;
  completionTokens: number;
  /** Streaming: chunks that carried text. */
  contentChunks: number;
}

const ChatMessageContent = z.looseObject({
  choices: z.tuple([z.looseObject({ message: z.looseObject({ content: z.string() }) })], z.unknown()),
  usage: z.looseObject({ completion_tokens: z.int() }),
});

const ChunkDelta = z.looseObject({
  choices: z.array(z.looseObject({ delta: z.looseObject({ content: z.string().nullish() }).optional() })),
  usage: z.looseObject({ completion_tokens: z.int() }).nullish(),
});

function summariseJson(body: string): CompletionSummary {
  const json: unknown = JSON.parse(body);
  ChatCompletion.parse(json);
  const parsed = ChatMessageContent.parse(json);
  return { content: parsed.choices[0].message.content, completionTokens: parsed.usage.completion_tokens, contentChunks: 0 };
}

function summariseStream(body: string): CompletionSummary {
  // Comments (the pool's stats line) and blank events carry no data and are skipped.
  const events = body.split(/\r?\n\r?\n/).filter((event) => event.trim().length > 0);
  const payloads = events.map(eventData).filter((data): data is string => data !== undefined);
  if (payloads[payloads.length - 1] !== "[DONE]") throw new Error("stream did not end with data: [DONE]");
  let content = "";
  let contentChunks = 0;
  let completionTokens: number | undefined;
  for (const payload of payloads.slice(0, -1)) {
    const json: unknown = JSON.parse(payload);
    ChatCompletionChunk.parse(json);
    const chunk = ChunkDelta.parse(json);
    const text = chunk.choices[0]?.delta?.content;
    if (text) {
      content += text;
      contentChunks++;
    }
    if (chunk.usage) completionTokens = chunk.usage.completion_tokens;
  }
  if (completionTokens === undefined) throw new Error("stream carried no usage chunk");
  return { content, completionTokens, contentChunks };
}

/** Parses a 200 body; throws with the reason when it is not a complete completion. */
export function summariseCompletion(mode: ProxyMode, body: string): CompletionSummary {
  return mode === "streaming" ? summariseStream(body) : summariseJson(body);
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);
const field = (value: unknown, key: string): unknown => (isObject(value) ? value[key] : undefined);
const firstChoice = (json: unknown): unknown => {
  const choices = field(json, "choices");
  return Array.isArray(choices) ? choices[0] : undefined;
};

/*
 * The per-response check during load runs. Same rules as summariseCompletion, but
 * plain JSON walking instead of zod (about 4× cheaper), because it runs in the load
 * generator for every response and must not become the bottleneck.
 */
function isCompleteJson(body: string, maxTokens: number): boolean {
  const json: unknown = JSON.parse(body);
  const content = field(field(firstChoice(json), "message"), "content");
  return (
    field(json, "object") === "chat.completion" &&
    typeof content === "string" &&
    content.length > 0 &&
    field(field(json, "usage"), "completion_tokens") === maxTokens
  );
}

function isCompleteStream(body: string, maxTokens: number): boolean {
  // Line by line: every event here is one `data:` line (comments, like the pool's stats line, are skipped).
  const dataLines: string[] = [];
  for (const raw of body.split("\n")) {
    if (raw.startsWith("data:")) dataLines.push(raw.slice(5).trim());
  }
  if (dataLines.pop() !== "[DONE]" || !body.trimEnd().endsWith(DONE_EVENT)) return false;
  let contentChunks = 0;
  let completionTokens: unknown;
  for (const data of dataLines) {
    const json: unknown = JSON.parse(data);
    if (field(json, "object") !== "chat.completion.chunk") return false;
    const text = field(field(firstChoice(json), "delta"), "content");
    if (typeof text === "string" && text.length > 0) contentChunks++;
    const usage = field(json, "usage");
    if (isObject(usage)) completionTokens = usage.completion_tokens;
  }
  return contentChunks === maxTokens && completionTokens === maxTokens;
}

/** autocannon-side check: true only for a complete completion of exactly maxTokens tokens (one chunk each when streaming). */
export function completionVerifier(workload: ChatWorkload): (body: string) => boolean {
  return (body) => {
    try {
      return workload.mode === "streaming" ? isCompleteStream(body, workload.maxTokens) : isCompleteJson(body, workload.maxTokens);
    } catch {
      return false;
    }
  };
}
