import { isJsonObject, type JsonObject } from "../protocol/json.js";
import { eventObject } from "../protocol/sse.js";
import type { CallFacts, CallToolCall, CallUsage } from "./call-facts.js";

/*
 * Call facts (call-facts.ts) from an answer an engine wrote in Anthropic's Messages
 * shape or OpenAI's Responses shape. As for chat, events are looked at as they pass:
 * only those a cheap text test says can carry usage or a tool call are parsed.
 *
 * Neither API reports usage on every event, so a stream cut short knows less than a
 * chat stream from an engine asked for continuous usage: Messages says its input at
 * `message_start` and the output is counted from the content deltas seen (each
 * carries at least one token: a lower bound); Responses says nothing before
 * `response.completed`, so such a cut-short call reports no usage.
 */

const MAX_TOOL_CALLS = 64;
const MAX_ARGUMENT_CHARS = 64 * 1024;

const count = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0);
const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

function toolCall(tool: unknown, id: unknown, args: string | undefined): CallToolCall {
  const call: CallToolCall = {};
  const name = text(tool);
  const callId = text(id);
  if (name !== undefined) call.tool = name;
  if (callId !== undefined) call.toolCallId = callId;
  if (args !== undefined) call.args = args.slice(0, MAX_ARGUMENT_CHARS);
  return call;
}

function withCalls(facts: CallFacts, calls: readonly CallToolCall[]): CallFacts {
  if (calls.length > 0) facts.toolCalls = calls.slice(0, MAX_TOOL_CALLS);
  return facts;
}

// ---------------------------------------------------------------- Messages

/** Anthropic counts cache reads and writes beside input_tokens; the prompt is their sum. */
function messagesUsage(usage: unknown, completionTokens?: number): CallUsage | undefined {
  if (!isJsonObject(usage) || typeof usage.input_tokens !== "number") return undefined;
  const cachedTokens = count(usage.cache_read_input_tokens);
  return {
    promptTokens: count(usage.input_tokens) + cachedTokens + count(usage.cache_creation_input_tokens),
    completionTokens: completionTokens ?? count(usage.output_tokens),
    cachedTokens,
  };
}

/** Facts of a whole Messages answer (`{"type":"message",…}`). */
export function factsFromMessage(body: unknown): CallFacts {
  if (!isJsonObject(body)) return {};
  const facts: CallFacts = {};
  const usage = messagesUsage(body.usage);
  if (usage !== undefined) facts.usage = usage;
  const calls: CallToolCall[] = [];
  for (const block of Array.isArray(body.content) ? body.content : []) {
    if (isJsonObject(block) && block.type === "tool_use") calls.push(toolCall(block.name, block.id, JSON.stringify(block.input ?? {})));
  }
  return withCalls(facts, calls);
}

interface PartialToolCall {
  tool?: string;
  id?: string;
  args: string;
}

export class MessagesStreamFacts {
  #input: JsonObject | undefined;
  #outputTokens: number | undefined;
  #deltas = 0;
  readonly #calls = new Map<number, PartialToolCall>();

  observe(event: string): void {
    if (event.includes("content_block_delta")) this.#deltas += 1;
    if (!(event.includes('"usage"') || event.includes("tool_use") || event.includes("input_json_delta"))) return;
    const payload = eventObject(event);
    if (payload === undefined) return;
    const index = typeof payload.index === "number" ? payload.index : 0;
    if (payload.type === "message_start" && isJsonObject(payload.message) && isJsonObject(payload.message.usage)) {
      this.#input = payload.message.usage;
    } else if (payload.type === "message_delta" && isJsonObject(payload.usage)) {
      if (typeof payload.usage.output_tokens === "number") this.#outputTokens = count(payload.usage.output_tokens);
      // Some engines state the input only at the end.
      if (typeof payload.usage.input_tokens === "number") this.#input = { ...this.#input, ...payload.usage };
    } else if (payload.type === "content_block_start" && isJsonObject(payload.content_block) && payload.content_block.type === "tool_use") {
      if (this.#calls.size < MAX_TOOL_CALLS) {
        const block = payload.content_block;
        const partial: PartialToolCall = { args: "" };
        const tool = text(block.name);
        const id = text(block.id);
        if (tool !== undefined) partial.tool = tool;
        if (id !== undefined) partial.id = id;
        this.#calls.set(index, partial);
      }
    } else if (payload.type === "content_block_delta" && isJsonObject(payload.delta) && typeof payload.delta.partial_json === "string") {
      const partial = this.#calls.get(index);
      if (partial !== undefined && partial.args.length < MAX_ARGUMENT_CHARS) partial.args = (partial.args + payload.delta.partial_json).slice(0, MAX_ARGUMENT_CHARS);
    }
  }

  facts(): CallFacts {
    const facts: CallFacts = {};
    const usage = messagesUsage(this.#input, this.#outputTokens ?? this.#deltas);
    if (usage !== undefined) facts.usage = usage;
    return withCalls(
      facts,
      [...this.#calls.values()].map((partial) => toolCall(partial.tool, partial.id, partial.args)),
    );
  }
}

// ---------------------------------------------------------------- Responses

/** Responses counts cached tokens inside input_tokens, as chat does. */
function responsesUsage(usage: unknown): CallUsage | undefined {
  if (!isJsonObject(usage) || typeof usage.input_tokens !== "number") return undefined;
  const promptTokens = count(usage.input_tokens);
  const details = isJsonObject(usage.input_tokens_details) ? usage.input_tokens_details : {};
  return { promptTokens, completionTokens: count(usage.output_tokens), cachedTokens: Math.min(promptTokens, count(details.cached_tokens)) };
}

/** Facts of a whole response object (`{"object":"response",…}`). */
export function factsFromResponse(body: unknown): CallFacts {
  if (!isJsonObject(body)) return {};
  const facts: CallFacts = {};
  const usage = responsesUsage(body.usage);
  if (usage !== undefined) facts.usage = usage;
  const calls: CallToolCall[] = [];
  for (const item of Array.isArray(body.output) ? body.output : []) {
    if (isJsonObject(item) && item.type === "function_call") calls.push(toolCall(item.name, item.call_id, typeof item.arguments === "string" ? item.arguments : undefined));
  }
  return withCalls(facts, calls);
}

const FINISHED = new Set(["response.completed", "response.incomplete", "response.failed"]);

export class ResponsesStreamFacts {
  /** The finished response as its last event carried it. */
  #finished: CallFacts | undefined;
  /** Function calls whose item was done before the stream ended (the facts of a stream cut short). */
  readonly #done: CallToolCall[] = [];

  observe(event: string): void {
    if (!(event.includes("function_call") || event.includes('"usage"'))) return;
    const payload = eventObject(event);
    if (payload === undefined || typeof payload.type !== "string") return;
    if (FINISHED.has(payload.type)) {
      this.#finished = factsFromResponse(payload.response);
    } else if (payload.type === "response.output_item.done" && isJsonObject(payload.item) && payload.item.type === "function_call") {
      const item = payload.item;
      if (this.#done.length < MAX_TOOL_CALLS) this.#done.push(toolCall(item.name, item.call_id, typeof item.arguments === "string" ? item.arguments : undefined));
    }
  }

  facts(): CallFacts {
    return this.#finished ?? withCalls({}, this.#done);
  }
}
