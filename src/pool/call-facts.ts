import type { CallFacts, CallToolCall, CallUsage } from "../core/tao/tool-signals.js";
import { Usage, usageCounts } from "../protocol/chat.js";
import { eventAt, eventData } from "../protocol/sse.js";
import type { CallApi } from "./engine-request.js";
import { eventsIn, utf8Of } from "./event-text.js";
import { factsFromMessage, factsFromResponse, MessagesStreamFacts, ResponsesStreamFacts } from "./native-call-facts.js";

/*
 * What the pool learns from an engine's answer for TAO: the usage (prompt, cached and
 * completion tokens: the cache-credit ledger's observation) and the tool calls the
 * model asked for (names, ids and arguments: the readiness predictor's evidence).
 *
 * Non-streaming: read from the JSON body the relay holds anyway. Streaming: each run of
 * events the relay passes on (event-text.ts: latin1, whole events) is looked at as it
 * passes, never held back; only events that can carry tool-call deltas are parsed (a
 * text search over the run first), and tool-call arguments, which arrive in fragments,
 * are the only thing accumulated, capped. Usage is the latest an event carried: the
 * final usage chunk of a whole stream, or, from an engine asked for
 * `continuous_usage_stats` (usage on every chunk), the count up to the last chunk of a
 * stream cut short, so a call the client abandoned still says what the engine did.
 * Only that latest usage event is kept, as text, and parsed when the facts are read.
 */

export type { CallFacts, CallToolCall, CallUsage };

/** Tool calls kept per answer, and characters of arguments per tool call (the readiness scan reads 64 KiB). */
const MAX_TOOL_CALLS = 64;
const MAX_ARGUMENT_CHARS = 64 * 1024;

/** A usage object at this position (sticky: tried at each `"usage"` from a run's end). */
const USAGE_OBJECT_AT = /"usage"\s*:\s*\{/y;
const USAGE_KEY = '"usage"';
const TOOL_CALLS_ARRAY = /"tool_calls"\s*:\s*\[/;

type JsonRecord = Record<string, unknown>;

const isRecord = (value: unknown): value is JsonRecord => typeof value === "object" && value !== null && !Array.isArray(value);
const stringOr = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined);

function usageOf(value: unknown): CallUsage | undefined {
  const parsed = Usage.safeParse(value);
  if (!parsed.success) return undefined;
  const counts = usageCounts(parsed.data);
  return { promptTokens: counts.prompt, completionTokens: counts.completion, cachedTokens: counts.cached };
}

function toolCallOf(value: unknown): CallToolCall | undefined {
  if (!isRecord(value)) return undefined;
  const fn = isRecord(value.function) ? value.function : {};
  const call: CallToolCall = {};
  const tool = stringOr(fn.name);
  const id = stringOr(value.id);
  if (tool !== undefined) call.tool = tool;
  if (id !== undefined) call.toolCallId = id;
  if (typeof fn.arguments === "string") call.args = fn.arguments.slice(0, MAX_ARGUMENT_CHARS);
  return call;
}

/** Facts of a whole chat.completion object; empty when it is not one. */
export function factsFromCompletion(body: unknown): CallFacts {
  if (!isRecord(body)) return {};
  const facts: CallFacts = {};
  const usage = usageOf(body.usage);
  if (usage !== undefined) facts.usage = usage;
  const calls: CallToolCall[] = [];
  for (const choice of Array.isArray(body.choices) ? body.choices : []) {
    const message = isRecord(choice) && isRecord(choice.message) ? choice.message : undefined;
    for (const raw of Array.isArray(message?.tool_calls) ? message.tool_calls : []) {
      const call = toolCallOf(raw);
      if (call !== undefined && calls.length < MAX_TOOL_CALLS) calls.push(call);
    }
  }
  if (calls.length > 0) facts.toolCalls = calls;
  return facts;
}

/** Facts of a non-streaming body's bytes; empty when they are not a JSON completion. */
export function factsFromJsonBytes(bytes: ArrayBuffer | Uint8Array): CallFacts {
  return jsonFacts(bytes, factsFromCompletion);
}

/** The JSON object of an event's data, or undefined when it has none. */
function chunkOf(event: string): JsonRecord | undefined {
  const data = eventData(event);
  if (data === undefined || data === "[DONE]") return undefined;
  try {
    const chunk: unknown = JSON.parse(data);
    return isRecord(chunk) ? chunk : undefined;
  } catch {
    return undefined;
  }
}

interface PartialToolCall {
  id?: string;
  name?: string;
  args: string;
}

/** The last event of a run that carries a usage object, or undefined. */
function lastUsageEvent(text: string): string | undefined {
  for (let at = text.lastIndexOf(USAGE_KEY); at !== -1; at = at === 0 ? -1 : text.lastIndexOf(USAGE_KEY, at - 1)) {
    USAGE_OBJECT_AT.lastIndex = at;
    if (USAGE_OBJECT_AT.test(text)) return eventAt(text, at);
  }
  return undefined;
}

/** Collects facts from a stream's events as they pass (see the top of this file). */
export class StreamFactsCollector {
  /** The latest event that carried a usage object, latin1 (parsed only when the facts are read). */
  #usageEvent: string | undefined;
  readonly #calls = new Map<string, PartialToolCall>();

  /** A run of whole events as the relay cut it (latin1, with their blank lines: event-text.ts). */
  observeEvents(text: string): void {
    const usageEvent = lastUsageEvent(text);
    if (usageEvent !== undefined) this.#usageEvent = usageEvent;
    if (!text.includes('"tool_calls"')) return;
    for (const event of eventsIn(text)) {
      if (TOOL_CALLS_ARRAY.test(event)) this.#observeToolCalls(utf8Of(event));
    }
  }

  /** An event that names tool calls (UTF-8). */
  #observeToolCalls(event: string): void {
    const chunk = chunkOf(event);
    if (chunk === undefined) return;
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (!isRecord(choice) || !isRecord(choice.delta) || !Array.isArray(choice.delta.tool_calls)) continue;
      const choiceIndex = typeof choice.index === "number" ? choice.index : 0;
      for (const delta of choice.delta.tool_calls) this.#addDelta(choiceIndex, delta);
    }
  }

  /** What the events seen so far say: at the end of a stream, or when it was cut short. */
  facts(): CallFacts {
    const facts: CallFacts = {};
    const usage = this.#usageEvent === undefined ? undefined : usageOf(chunkOf(utf8Of(this.#usageEvent))?.usage);
    if (usage !== undefined) facts.usage = usage;
    if (this.#calls.size > 0) {
      facts.toolCalls = [...this.#calls.values()].map((partial) => {
        const call: CallToolCall = { args: partial.args };
        if (partial.name !== undefined) call.tool = partial.name;
        if (partial.id !== undefined) call.toolCallId = partial.id;
        return call;
      });
    }
    return facts;
  }

  /** A tool-call delta: the first names it (id, function.name), the next ones append argument text. */
  #addDelta(choiceIndex: number, delta: unknown): void {
    if (!isRecord(delta)) return;
    const key = `${choiceIndex}:${typeof delta.index === "number" ? delta.index : 0}`;
    let partial = this.#calls.get(key);
    if (partial === undefined) {
      if (this.#calls.size >= MAX_TOOL_CALLS) return;
      partial = { args: "" };
      this.#calls.set(key, partial);
    }
    const fn = isRecord(delta.function) ? delta.function : {};
    partial.id ??= stringOr(delta.id);
    partial.name ??= stringOr(fn.name);
    if (typeof fn.arguments === "string" && partial.args.length < MAX_ARGUMENT_CHARS) {
      partial.args = (partial.args + fn.arguments).slice(0, MAX_ARGUMENT_CHARS);
    }
  }
}

/** What a stream's facts are read from: runs of whole events, latin1 (event-text.ts), as the relay passes them on. */
export interface StreamFacts {
  observeEvents(text: string): void;
  facts(): CallFacts;
}

/** Reads an answer's facts in the API it was written in (the engine's form of the call: engine-request.ts). */
export interface AnswerFactsReader {
  fromJsonBytes(bytes: ArrayBuffer | Uint8Array): CallFacts;
  stream(): StreamFacts;
}

/** One decoder for all answers (decode() without `stream` keeps no state between calls). */
const UTF8 = new TextDecoder();

function jsonFacts(bytes: ArrayBuffer | Uint8Array, read: (body: unknown) => CallFacts): CallFacts {
  try {
    return read(JSON.parse(UTF8.decode(bytes)));
  } catch {
    return {};
  }
}

/**
 * A stream's facts are read twice at its end (for the stats comment, then for the
 * attempt's end), with no event between as a rule: read once (the usage event's JSON
 * parse and zod check) until the next events come.
 */
function readOncePerRun(collector: StreamFacts): StreamFacts {
  let read: CallFacts | undefined;
  return {
    observeEvents(text) {
      read = undefined;
      collector.observeEvents(text);
    },
    facts() {
      return (read ??= collector.facts());
    },
  };
}

/** A collector of single events (UTF-8, without their blank lines) read from runs of them. */
function eventByEvent(collector: { observe(event: string): void; facts(): CallFacts }): StreamFacts {
  return {
    observeEvents(text) {
      for (const event of eventsIn(text)) collector.observe(utf8Of(event));
    },
    facts: () => collector.facts(),
  };
}

const CHAT_FACTS: AnswerFactsReader = { fromJsonBytes: factsFromJsonBytes, stream: () => readOncePerRun(new StreamFactsCollector()) };
const MESSAGES_FACTS: AnswerFactsReader = {
  fromJsonBytes: (bytes) => jsonFacts(bytes, factsFromMessage),
  stream: () => readOncePerRun(eventByEvent(new MessagesStreamFacts())),
};
const RESPONSES_FACTS: AnswerFactsReader = {
  fromJsonBytes: (bytes) => jsonFacts(bytes, factsFromResponse),
  stream: () => readOncePerRun(eventByEvent(new ResponsesStreamFacts())),
};

export function answerFactsReader(api: CallApi): AnswerFactsReader {
  if (api === "messages") return MESSAGES_FACTS;
  if (api === "responses") return RESPONSES_FACTS;
  return CHAT_FACTS;
}
