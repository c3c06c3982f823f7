import { z } from "zod";
import {
  type ChatCompletion,
  type ChatCompletionRequest,
  type ChatMessage,
  ToolCall,
  type ToolCall as ToolCallType,
  Usage,
  ToolCallDelta,
  type Usage as UsageType,
} from "../chat.js";
import { OpenAIErrorBody } from "../errors.js";
import { randomToken } from "../ids.js";
import {
  FunctionCallItem,
  ItemStatus,
  type FunctionTool,
  type InputItem,
  type MessageContentPart,
  type MessageItem,
  type OutputItem,
  type ResponseObject,
  type ResponseStreamEvent,
  type ResponseUsage,
  type ResponsesRequest,
} from "../responses.js";

/*
 * OpenAI's Responses API served through chat completions: a request (with the
 * conversation its previous_response_id names, resolved by the caller) is translated
 * to the chat request the engines already take, and their answers (whole or streamed)
 * back. Pure: no I/O, no clock, no store. IDs derive from the chat completion's ID
 * (resp_/msg_/fc_ + its own part), so both sides' logs match; the only randomness is
 * for a completion an engine sent without an ID.
 *
 * Deliberately not translated: reasoning output (an engine's reasoning_content has no
 * item here; requests cannot ask for summaries), logprobs (`include` is refused),
 * annotations (no hosted tools), and refusal parts in output (engines produce none;
 * a completion's refusal is shown as its text, as messages-chat.ts does).
 */

type ContentPart = Exclude<ChatMessage["content"], string | null | undefined>[number];
type ChatTool = NonNullable<ChatCompletionRequest["tools"]>[number];

// ---------------------------------------------------------------- request

const textPart = (text: string): ContentPart => ({ type: "text", text });

/** One text part is a plain string, as most chat templates expect; anything else stays parts (as in messages-chat.ts). */
function contentOf(parts: ContentPart[]): string | ContentPart[] {
  const [only] = parts;
  if (parts.length === 0) return "";
  if (parts.length === 1 && only?.type === "text" && typeof only.text === "string") return only.text;
  return parts;
}

function chatPart(part: MessageContentPart): ContentPart | undefined {
  if (part.type === "input_text" || part.type === "output_text") return textPart(part.text);
  if (part.type === "input_image") {
    // Chat's detail has no "original"; left out, the engine uses its default.
    const detail = part.detail === "original" ? undefined : part.detail;
    return { type: "image_url", image_url: { url: part.image_url, ...(detail ? { detail } : {}) } };
  }
  return undefined; // a refusal: only in assistant messages (responses.ts), handled there
}

/**
 * A user, system or developer message. Developer becomes system: the same instruction
 * level in chat terms, and most engines' chat templates know no developer role.
 */
function plainMessage(item: MessageItem): ChatMessage {
  const role = item.role === "user" ? "user" : "system";
  return { role, content: contentOf(item.content.flatMap((part) => chatPart(part) ?? [])) };
}

interface AssistantTurn {
  texts: ContentPart[];
  refusals: string[];
  calls: ToolCallType[];
}

function assistantMessage(turn: AssistantTurn): ChatMessage {
  const nothingElse = turn.calls.length === 0 && turn.refusals.length === 0;
  const message: ChatMessage = { role: "assistant", content: turn.texts.length > 0 || nothingElse ? contentOf(turn.texts) : null };
  if (turn.calls.length > 0) message.tool_calls = turn.calls;
  if (turn.refusals.length > 0) message.refusal = turn.refusals.join("\n");
  return message;
}

/**
 * The conversation as chat messages. Consecutive assistant items (its messages and
 * function calls) are one assistant turn, the way the engine generated it: one chat
 * message with the text as content and the calls as tool_calls. So the rendered prompt
 * is the one the engine already holds in its prefix cache, and each tool message
 * follows the message whose call it answers, as chat completions requires.
 */
function chatMessagesOf(items: readonly InputItem[]): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let turn: AssistantTurn | undefined;
  const flush = (): void => {
    if (turn) messages.push(assistantMessage(turn));
    turn = undefined;
  };
  for (const item of items) {
    if (item.type === "function_call") {
      turn ??= { texts: [], refusals: [], calls: [] };
      turn.calls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments } });
    } else if (item.type === "message" && item.role === "assistant") {
      turn ??= { texts: [], refusals: [], calls: [] };
      for (const part of item.content) {
        if (part.type === "refusal") turn.refusals.push(part.refusal);
        else if (part.type === "input_text" || part.type === "output_text") turn.texts.push(textPart(part.text));
      }
    } else {
      flush();
      if (item.type === "message") messages.push(plainMessage(item));
      else {
        const content = typeof item.output === "string" ? item.output : contentOf(item.output.map((part) => textPart(part.text)));
        messages.push({ role: "tool", tool_call_id: item.call_id, content });
      }
    }
  }
  flush();
  return messages;
}

function chatTool(tool: FunctionTool): ChatTool {
  return {
    type: "function",
    function: {
      name: tool.name,
      ...(typeof tool.description === "string" ? { description: tool.description } : {}),
      ...(tool.parameters ? { parameters: tool.parameters } : {}),
      ...(typeof tool.strict === "boolean" ? { strict: tool.strict } : {}),
    },
  };
}

function responseFormatOf(request: ResponsesRequest): ChatCompletionRequest["response_format"] {
  const format = request.text?.format;
  if (!format || format.type === "text") return undefined; // text is chat's default too
  if (format.type === "json_object") return { type: "json_object" };
  const { name, schema, description, strict } = format;
  return {
    type: "json_schema",
    json_schema: { name, schema, ...(description !== undefined ? { description } : {}), ...(typeof strict === "boolean" ? { strict } : {}) },
  };
}

/**
 * The chat request that asks an engine for what a Responses request asks for.
 * `history` is the conversation previous_response_id names (conversationItemsOf of
 * the earlier response), which the caller resolves; the earlier response's
 * instructions are not part of it: as at OpenAI, only this request's instructions
 * apply, as the first (system) message. A stream always asks for usage
 * (response.completed reports it). `user` carries the request's user, else its
 * prompt_cache_key: the edge keeps prompt_cache_key (a session key) from engines, and both name who shares a cache.
 * metadata and store stay with the caller (echoed in the response, never the engine's).
 */
export function responsesToChatRequest(request: ResponsesRequest, history: readonly InputItem[] = []): ChatCompletionRequest {
  const instructions: ChatMessage[] = request.instructions ? [{ role: "system", content: request.instructions }] : [];
  const out: ChatCompletionRequest = {
    model: request.model,
    messages: [...instructions, ...chatMessagesOf([...history, ...request.input])],
  };
  if (request.tools && request.tools.length > 0) out.tools = request.tools.map(chatTool);
  if (request.tool_choice !== undefined) {
    out.tool_choice = typeof request.tool_choice === "string" ? request.tool_choice : { type: "function", function: { name: request.tool_choice.name } };
  }
  if (typeof request.parallel_tool_calls === "boolean") out.parallel_tool_calls = request.parallel_tool_calls;
  if (typeof request.max_output_tokens === "number") out.max_tokens = request.max_output_tokens;
  if (typeof request.temperature === "number") out.temperature = request.temperature;
  if (typeof request.top_p === "number") out.top_p = request.top_p;
  const responseFormat = responseFormatOf(request);
  if (responseFormat) out.response_format = responseFormat;
  if (request.reasoning?.effort) out.reasoning_effort = request.reasoning.effort;
  const user = request.user ?? request.prompt_cache_key ?? undefined;
  if (user !== undefined) out.user = user;
  if (request.stream === true) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

// ---------------------------------------------------------------- response

export interface ResponseIds {
  response: string;
  /** The n-th message item (n = 0 for the first; a stream may start another after a tool call). */
  message(n: number): string;
  /** The item of the tool call at this index of the chat answer. */
  functionCall(index: number): string;
  /** call_id for a tool call the engine sent without an ID. */
  callId(index: number): string;
}

/** The response's IDs: the chat ID's own part behind OpenAI's prefixes, so they follow from the completion alone. */
export function responseIdsOf(chatId: string): ResponseIds {
  const stripped = chatId.replace(/^chatcmpl-/, "");
  const own = stripped.length > 0 ? stripped : randomToken(24);
  return {
    response: `resp_${own}`,
    message: (n) => (n === 0 ? `msg_${own}` : `msg_${own}_${n}`),
    functionCall: (index) => `fc_${own}_${index}`,
    callId: (index) => `call_${own}_${index}`,
  };
}

const CompletionTokensDetails = z.looseObject({ reasoning_tokens: z.int().nonnegative().nullish() }).nullish();

/** Chat usage as Responses' usage: both count cached tokens inside the prompt. */
export function responseUsageOf(usage: UsageType): ResponseUsage {
  const prompt = usage.prompt_tokens;
  const details = CompletionTokensDetails.safeParse(usage.completion_tokens_details);
  return {
    input_tokens: prompt,
    input_tokens_details: { cached_tokens: Math.min(prompt, usage.prompt_tokens_details?.cached_tokens ?? 0), cache_write_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: (details.success ? details.data?.reasoning_tokens : undefined) ?? 0 },
    total_tokens: usage.total_tokens,
  };
}

type Outcome = Pick<ResponseObject, "status" | "incomplete_details" | "error">;

const failed = (message: string): Outcome => ({ status: "failed", incomplete_details: null, error: { code: "server_error", message } });

/**
 * The response's status for a chat finish_reason. length is OpenAI's
 * max_output_tokens (the edge may have lowered the limit to the plan's or the budget's,
 * which is still the limit the response ran into). vLLM and SGLang report an engine-side
 * abort as "abort": the answer is cut, so the response failed. Anything else
 * (stop, tool_calls, none) is a finished turn.
 */
export function responseOutcomeOf(finishReason: string | null | undefined): Outcome {
  if (finishReason === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, error: null };
  if (finishReason === "content_filter") return { status: "incomplete", incomplete_details: { reason: "content_filter" }, error: null };
  if (finishReason === "abort") return failed("The engine aborted the response.");
  return { status: "completed", incomplete_details: null, error: null };
}

function echoedTool(tool: FunctionTool): ResponseObject["tools"][number] {
  return {
    type: "function",
    name: tool.name,
    ...(tool.description !== undefined ? { description: tool.description } : {}),
    parameters: tool.parameters ?? null,
    strict: tool.strict ?? null,
  };
}

/** A response in progress: the request's settings echoed as OpenAI does, nothing produced yet. */
function responseShell(request: ResponsesRequest, id: string, createdAt: number, model: string): ResponseObject {
  return {
    id,
    object: "response",
    created_at: createdAt,
    status: "in_progress",
    model,
    output: [],
    output_text: "",
    error: null,
    incomplete_details: null,
    instructions: request.instructions ?? null,
    metadata: request.metadata ?? {},
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    temperature: request.temperature ?? null,
    top_p: request.top_p ?? null,
    tool_choice: request.tool_choice ?? "auto",
    tools: (request.tools ?? []).map(echoedTool),
    max_output_tokens: request.max_output_tokens ?? null,
    previous_response_id: request.previous_response_id ?? null,
    prompt_cache_key: request.prompt_cache_key ?? null,
    reasoning: request.reasoning ?? null,
    text: { ...request.text, format: request.text?.format ?? { type: "text" } },
    truncation: "disabled",
    background: false,
    ...(request.user !== undefined ? { user: request.user } : {}),
  };
}

/** In a response that did not complete, the last item is the one that was cut: it alone is incomplete. */
function itemStatus(outcome: Outcome, index: number, count: number): OutputItem["status"] {
  return outcome.status !== "completed" && index === count - 1 ? "incomplete" : "completed";
}

/** The shell with its output (statuses already set) and outcome. */
function settledResponse(shell: ResponseObject, output: OutputItem[], outcome: Outcome, usage: UsageType | null | undefined): ResponseObject {
  const text = output.flatMap((item) => (item.type === "message" ? item.content.map((part) => part.text) : [])).join("");
  return { ...shell, ...outcome, output, output_text: text, ...(usage ? { usage: responseUsageOf(usage) } : {}) };
}

const isBlank = (text: string): boolean => text.trim().length === 0;

/** Just what the translation reads from a completion's choice. */
const CompletionChoice = z.looseObject({
  message: z
    .looseObject({ content: z.string().nullish(), refusal: z.string().nullish(), tool_calls: z.array(ToolCall).nullish() })
    .nullish(),
  finish_reason: z.string().nullish(),
});

/**
 * A chat completion as a response; only choice 0 counts (chat.ts allows n = 1 only).
 * Whitespace an engine wrote before its tool calls (tool parsers leave the newlines
 * before the call markup in content) is no message: clients would show an empty one.
 */
export function chatCompletionToResponse(completion: ChatCompletion, request: ResponsesRequest): ResponseObject {
  const ids = responseIdsOf(completion.id);
  const parsed = CompletionChoice.safeParse(completion.choices.find((c) => c.index === 0));
  const choice = parsed.success ? parsed.data : undefined;
  // A refusal is the model's answer to the turn: shown as its text rather than lost.
  const text = choice?.message?.content || choice?.message?.refusal || "";
  const calls = choice?.message?.tool_calls ?? [];
  const output: OutputItem[] = [];
  if (calls.length === 0 || !isBlank(text)) {
    output.push({ id: ids.message(0), type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text, annotations: [] }] });
  }
  calls.forEach((call, index) => {
    output.push({
      id: ids.functionCall(index),
      type: "function_call",
      call_id: call.id.length > 0 ? call.id : ids.callId(index),
      name: call.function.name,
      arguments: call.function.arguments,
      status: "completed",
    });
  });
  const outcome = responseOutcomeOf(choice?.finish_reason);
  const settled = output.map((item, index): OutputItem => ({ ...item, status: itemStatus(outcome, index, output.length) }));
  const shell = responseShell(request, ids.response, completion.created, completion.model);
  return settledResponse(shell, settled, outcome, completion.usage);
}

/**
 * An output item as any engine writes it (this translation, or an engine serving the
 * Responses API natively, whose items carry more fields and other types): an
 * assistant message's text parts and a function call are replayed; reasoning items
 * and anything else are not part of the conversation a later call continues.
 */
const ReplayedOutputItem = z.discriminatedUnion("type", [
  z.looseObject({
    type: z.literal("message"),
    id: z.string().optional(),
    status: ItemStatus.optional(),
    content: z.array(z.looseObject({ type: z.string(), text: z.string().optional() })),
  }),
  // An output function call is already an input item as it stands (its other fields are dropped).
  FunctionCallItem,
]);

function asInputItem(output: unknown): InputItem[] {
  const parsed = ReplayedOutputItem.safeParse(output);
  if (!parsed.success) return [];
  const item = parsed.data;
  const common = { ...(item.id === undefined ? {} : { id: item.id }), ...(item.status === undefined ? {} : { status: item.status }) };
  if (item.type === "function_call") return [{ type: "function_call", call_id: item.call_id, name: item.name, arguments: item.arguments, ...common }];
  const content = item.content.flatMap((part) => (part.type === "output_text" && part.text !== undefined ? [{ type: "output_text" as const, text: part.text }] : []));
  return [{ type: "message", role: "assistant", content, ...common }];
}

/**
 * The conversation after a response, for a later request whose previous_response_id
 * names it: the conversation before it (`history`, what it continued), its input, then
 * its output. Pass it as that request's `history`. Whether a failed or incomplete
 * response may be continued is the caller's choice.
 */
export function conversationItemsOf(request: ResponsesRequest, response: { output: readonly unknown[] }, history: readonly InputItem[] = []): InputItem[] {
  return [...history, ...request.input, ...response.output.flatMap(asInputItem)];
}

// ---------------------------------------------------------------- stream

/** Just what the stream translation reads from a chunk. */
const ChunkView = z.looseObject({
  id: z.string(),
  created: z.number(),
  model: z.string(),
  choices: z
    .array(
      z.looseObject({
        index: z.number(),
        delta: z
          .looseObject({
            content: z.string().nullish(),
            refusal: z.string().nullish(),
            tool_calls: z.array(ToolCallDelta).nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: Usage.nullish(),
});
type ChunkView = z.infer<typeof ChunkView>;

interface LiveMessage {
  kind: "message";
  outputIndex: number;
  id: string;
  text: string;
  /** Set when the item closed: the status its output_item.done carried. */
  status?: OutputItem["status"];
}

interface LiveCall {
  kind: "call";
  outputIndex: number;
  id: string;
  callId: string;
  name: string;
  arguments: string;
  status?: OutputItem["status"];
}

type LiveItem = LiveMessage | LiveCall;

/** An item as output_item events and the final response show it: in progress (no content yet) until it closed. */
function outputItemOf(item: LiveItem): OutputItem {
  const status = item.status ?? "in_progress";
  if (item.kind === "message") {
    const content = item.status ? [{ type: "output_text" as const, text: item.text, annotations: [] }] : [];
    return { id: item.id, type: "message", role: "assistant", status, content };
  }
  return { id: item.id, type: "function_call", call_id: item.callId, name: item.name, arguments: item.arguments, status };
}

/**
 * Turns a chat-completions stream into Responses events, chunk by chunk: push() each
 * parsed `data:` payload, finish() when the stream ends ([DONE] or the end of the
 * body), fail() when the caller cuts it (a timeout). sequence_number counts every event
 * from 0.
 *
 * The first chunk opens the response (response.created, response.in_progress; its ID
 * follows from the chunk's, as in chatCompletionToResponse). Text streams into a
 * message item; the first delta of a tool call closes that message and opens a
 * function_call item whose arguments stream as they come. Tool calls stay open until
 * the finish_reason, so a chat stream that interleaves calls by index still lands
 * every delta in its own open item, and text after a call opens a new message. Items
 * close, in output order, at the finish_reason; response.completed (or .incomplete)
 * waits for the usage chunk after it, so it carries the engine's counts. Whitespace
 * before a tool call makes no message (as in chatCompletionToResponse).
 *
 * A stream that ends before its finish_reason, an error payload from the edge or the
 * pool, or fail() ends the response as response.failed (its last item incomplete);
 * before any chunk there is no response to fail, so they send an `error` event.
 */
export class ChatToResponsesStream {
  private readonly request: ResponsesRequest;
  private sequence = 0;
  private ids: ResponseIds | undefined;
  private shell: ResponseObject | undefined;
  /** open: items may come; closed: the finish_reason came, waiting for usage; ended: the last event sent. */
  private phase: "open" | "closed" | "ended" = "open";
  private readonly items: LiveItem[] = [];
  private message: LiveMessage | undefined;
  private readonly calls = new Map<number, LiveCall>();
  private messages = 0;
  /** Whitespace held while no message is open: it becomes text if text follows, nothing if a call does. */
  private blank = "";
  private outcome: Outcome | undefined;
  private usage: UsageType | undefined;
  private final: ResponseObject | undefined;

  constructor(request: ResponsesRequest) {
    this.request = request;
  }

  /** Whether the last event (response.completed/.incomplete/.failed or error) has been emitted. */
  get ended(): boolean {
    return this.phase === "ended";
  }

  /** The finished response (what response.completed carried), to store for a later previous_response_id. */
  get response(): ResponseObject | undefined {
    return this.final;
  }

  /** The events one chat chunk (or an OpenAI-shaped error payload) yields; unreadable payloads yield none. */
  push(payload: unknown): ResponseStreamEvent[] {
    if (this.phase === "ended") return [];
    const error = OpenAIErrorBody.safeParse(payload);
    if (error.success) return this.fail(error.data.error.message, error.data.error.code);
    const parsed = ChunkView.safeParse(payload);
    if (!parsed.success) return [];
    const chunk = parsed.data;
    const events: ResponseStreamEvent[] = [];
    if (!this.shell) this.start(chunk, events);
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.find((c) => c.index === 0);
    if (choice && this.phase === "open") {
      const text = choice.delta?.content || choice.delta?.refusal;
      if (text) this.text(text, events);
      for (const call of choice.delta?.tool_calls ?? []) this.toolCall(call, events);
      if (choice.finish_reason) {
        this.outcome = responseOutcomeOf(choice.finish_reason);
        this.closeItems(events);
        this.phase = "closed";
      }
    }
    // The usage chunk: no choices, after the finish_reason.
    if (this.phase === "closed" && chunk.usage && (chunk.choices ?? []).length === 0) this.end(events);
    return events;
  }

  /** The events that end the response once the chat stream is over; none if it already ended. */
  finish(): ResponseStreamEvent[] {
    if (this.phase === "open") return this.fail("The engine's stream ended before the response finished.", "server_error");
    if (this.phase === "ended") return [];
    const events: ResponseStreamEvent[] = [];
    this.end(events);
    return events;
  }

  /** Ends the response as failed (the call broke or timed out); none if it already ended. */
  fail(message: string, code: string | null = null): ResponseStreamEvent[] {
    if (this.phase === "ended") return [];
    const events: ResponseStreamEvent[] = [];
    if (!this.shell) {
      this.phase = "ended";
      events.push({ type: "error", sequence_number: this.next(), code, message, param: null });
      return events;
    }
    this.outcome = failed(message);
    if (this.phase === "open") this.closeItems(events);
    this.end(events);
    return events;
  }

  private next(): number {
    return this.sequence++;
  }

  private start(chunk: ChunkView, events: ResponseStreamEvent[]): void {
    this.ids = responseIdsOf(chunk.id);
    this.shell = responseShell(this.request, this.ids.response, chunk.created, chunk.model);
    events.push({ type: "response.created", sequence_number: this.next(), response: this.shell });
    events.push({ type: "response.in_progress", sequence_number: this.next(), response: this.shell });
  }

  private openMessage(events: ResponseStreamEvent[]): LiveMessage {
    const id = this.ids?.message(this.messages++) ?? "";
    const message: LiveMessage = { kind: "message", outputIndex: this.items.length, id, text: "" };
    this.items.push(message);
    this.message = message;
    const output_index = message.outputIndex;
    events.push({ type: "response.output_item.added", sequence_number: this.next(), output_index, item: outputItemOf(message) });
    events.push({
      type: "response.content_part.added",
      sequence_number: this.next(),
      item_id: id,
      output_index,
      content_index: 0,
      part: { type: "output_text", text: "", annotations: [] },
    });
    return message;
  }

  private text(piece: string, events: ResponseStreamEvent[]): void {
    if (!this.message) {
      if (isBlank(this.blank + piece)) {
        this.blank += piece;
        return;
      }
      piece = this.blank + piece;
      this.blank = "";
    }
    const message = this.message ?? this.openMessage(events);
    message.text += piece;
    events.push({
      type: "response.output_text.delta",
      sequence_number: this.next(),
      item_id: message.id,
      output_index: message.outputIndex,
      content_index: 0,
      delta: piece,
      logprobs: [],
    });
  }

  private closeMessage(message: LiveMessage, status: OutputItem["status"], events: ResponseStreamEvent[]): void {
    message.status = status;
    if (this.message === message) this.message = undefined;
    const at = { item_id: message.id, output_index: message.outputIndex, content_index: 0 };
    events.push({ type: "response.output_text.done", sequence_number: this.next(), ...at, text: message.text, logprobs: [] });
    events.push({
      type: "response.content_part.done",
      sequence_number: this.next(),
      ...at,
      part: { type: "output_text", text: message.text, annotations: [] },
    });
    events.push({ type: "response.output_item.done", sequence_number: this.next(), output_index: message.outputIndex, item: outputItemOf(message) });
  }

  private toolCall(call: ToolCallDelta, events: ResponseStreamEvent[]): void {
    let live = this.calls.get(call.index);
    if (!live) {
      if (this.message) this.closeMessage(this.message, "completed", events);
      this.blank = "";
      const ids = this.ids;
      live = {
        kind: "call",
        outputIndex: this.items.length,
        id: ids?.functionCall(call.index) ?? "",
        callId: call.id || (ids?.callId(call.index) ?? ""),
        name: call.function?.name ?? "",
        arguments: "",
      };
      this.items.push(live);
      this.calls.set(call.index, live);
      events.push({ type: "response.output_item.added", sequence_number: this.next(), output_index: live.outputIndex, item: outputItemOf(live) });
    } else if (live.name.length === 0 && call.function?.name) {
      // Engines send the name on a call's first delta; one that did not names it here.
      live.name = call.function.name;
    }
    const piece = call.function?.arguments ?? "";
    if (piece.length === 0) return;
    live.arguments += piece;
    events.push({
      type: "response.function_call_arguments.delta",
      sequence_number: this.next(),
      item_id: live.id,
      output_index: live.outputIndex,
      delta: piece,
    });
  }

  /**
   * Closes every open item in output order, the last one incomplete unless the response
   * completed. A response that produced nothing still has its (empty) message, as
   * chatCompletionToResponse gives it; held whitespace is its text only then.
   */
  private closeItems(events: ResponseStreamEvent[]): void {
    if (this.items.length === 0) {
      this.openMessage(events);
      if (this.blank.length > 0) this.text(this.blank, events);
    }
    this.blank = "";
    const outcome = this.outcome ?? responseOutcomeOf(undefined);
    this.items.forEach((item, index) => {
      if (item.status) return;
      const status = itemStatus(outcome, index, this.items.length);
      if (item.kind === "message") {
        this.closeMessage(item, status, events);
        return;
      }
      item.status = status;
      const at = { item_id: item.id, output_index: item.outputIndex };
      events.push({ type: "response.function_call_arguments.done", sequence_number: this.next(), ...at, name: item.name, arguments: item.arguments });
      events.push({ type: "response.output_item.done", sequence_number: this.next(), output_index: item.outputIndex, item: outputItemOf(item) });
    });
  }

  private end(events: ResponseStreamEvent[]): void {
    this.phase = "ended";
    if (!this.shell) return;
    const outcome = this.outcome ?? responseOutcomeOf(undefined);
    const output = this.items.map(outputItemOf);
    const response = settledResponse(this.shell, output, outcome, this.usage);
    this.final = response;
    const type =
      response.status === "failed" ? "response.failed" : response.status === "incomplete" ? "response.incomplete" : "response.completed";
    events.push({ type, sequence_number: this.next(), response });
  }
}
