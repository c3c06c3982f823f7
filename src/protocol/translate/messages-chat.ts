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
  type ContentBlock,
  type ContentBlockDelta,
  type CountTokensRequest,
  type ImageBlock,
  type MessageParam,
  type MessagesRequest,
  type MessagesResponse,
  type MessagesStreamEvent,
  type MessagesUsage,
  messagesErrorBody,
  type ResponseContentBlock,
  type StopReason,
  type TextBlock,
  type ToolChoice,
  type ToolParam,
} from "../messages.js";
import { estimatePromptTokens } from "../tokens.js";

/*
 * Anthropic's Messages API served through chat completions: requests are translated
 * to the chat request the engines already take, and their answers (whole or streamed)
 * back. Pure: no I/O, no clock; the only randomness is an ID for a tool call an engine
 * sent without one.
 *
 * Deliberately dropped in translation, because chat completions has no place for them:
 * `cache_control` (engines cache prefixes on their own), a tool result's `is_error`,
 * earlier turns' thinking blocks (no chat field carries them and templates strip past
 * reasoning anyway), and an engine's reasoning output (the request cannot ask for
 * thinking: messages.ts refuses `thinking`).
 */

type ContentPart = Exclude<ChatMessage["content"], string | null | undefined>[number];

// ---------------------------------------------------------------- request

function imageUrl(block: ImageBlock): string {
  const { source } = block;
  return source.type === "base64" ? `data:${source.media_type};base64,${source.data}` : source.url;
}

function textPart(text: string): ContentPart {
  return { type: "text", text };
}

function imagePart(block: ImageBlock): ContentPart {
  return { type: "image_url", image_url: { url: imageUrl(block) } };
}

/** One text part is a plain string, as most chat templates expect; anything else stays parts. */
function contentOf(parts: ContentPart[]): string | ContentPart[] {
  const [only] = parts;
  if (parts.length === 1 && only?.type === "text" && typeof only.text === "string") return only.text;
  return parts;
}

function systemMessage(system: string | TextBlock[]): ChatMessage | undefined {
  if (typeof system === "string") return system.length > 0 ? { role: "system", content: system } : undefined;
  if (system.length === 0) return undefined;
  return { role: "system", content: contentOf(system.map((block) => textPart(block.text))) };
}

function toolCallOf(block: Extract<ContentBlock, { type: "tool_use" }>): ToolCallType {
  return { id: block.id, type: "function", function: { name: block.name, arguments: JSON.stringify(block.input) } };
}

function assistantMessage(content: ContentBlock[]): ChatMessage {
  const parts: ContentPart[] = [];
  const calls: ToolCallType[] = [];
  for (const block of content) {
    if (block.type === "text") parts.push(textPart(block.text));
    else if (block.type === "tool_use") calls.push(toolCallOf(block));
    // An assistant turn holds no images or tool results worth an engine's reading; thinking is dropped (above).
  }
  if (calls.length === 0) return { role: "assistant", content: parts.length > 0 ? contentOf(parts) : "" };
  return { role: "assistant", content: parts.length > 0 ? contentOf(parts) : null, tool_calls: calls };
}

/**
 * A user turn becomes its tool results, each a `tool` message in block order, then one
 * user message with the rest. Tool messages come first because chat completions wants
 * them right after the assistant message that made the calls (Anthropic puts them first
 * in the turn for the same reason). A tool message carries text only, so a tool
 * result's images move into that user message, where the model still sees them.
 */
function userMessages(content: ContentBlock[]): ChatMessage[] {
  const tools: ChatMessage[] = [];
  const parts: ContentPart[] = [];
  for (const block of content) {
    if (block.type === "text") parts.push(textPart(block.text));
    else if (block.type === "image") parts.push(imagePart(block));
    else if (block.type === "tool_result") {
      const result = block.content ?? "";
      if (typeof result === "string") {
        tools.push({ role: "tool", tool_call_id: block.tool_use_id, content: result });
        continue;
      }
      const texts = result.flatMap((b) => (b.type === "text" ? [textPart(b.text)] : []));
      for (const b of result) if (b.type === "image") parts.push(imagePart(b));
      tools.push({ role: "tool", tool_call_id: block.tool_use_id, content: texts.length > 0 ? contentOf(texts) : "" });
    }
  }
  if (parts.length === 0) return tools.length > 0 ? tools : [{ role: "user", content: "" }];
  return [...tools, { role: "user", content: contentOf(parts) }];
}

function chatMessages(message: MessageParam): ChatMessage[] {
  if (typeof message.content === "string") return [{ role: message.role, content: message.content }];
  return message.role === "assistant" ? [assistantMessage(message.content)] : userMessages(message.content);
}

function chatTool(tool: ToolParam): NonNullable<ChatCompletionRequest["tools"]>[number] {
  return {
    type: "function",
    function: {
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: tool.input_schema,
    },
  };
}

function chatToolChoice(choice: ToolChoice): ChatCompletionRequest["tool_choice"] {
  if (choice.type === "any") return "required";
  if (choice.type === "tool") return { type: "function", function: { name: choice.name } };
  return choice.type;
}

/** What the prompt is made of: the part of a request that count_tokens measures. */
function chatPrompt(req: CountTokensRequest): Pick<ChatCompletionRequest, "messages" | "tools"> {
  const system = req.system === undefined ? undefined : systemMessage(req.system);
  const messages = [...(system ? [system] : []), ...req.messages.flatMap(chatMessages)];
  return req.tools && req.tools.length > 0 ? { messages, tools: req.tools.map(chatTool) } : { messages };
}

/**
 * The chat request that asks an engine for what a Messages request asks for. A stream
 * always asks for usage (the final message_delta reports it). `top_k` is not one of
 * OpenAI's fields but vLLM and SGLang read it; it is an extension to chat.ts
 * (REQUEST_FIELDS), so whoever forwards the result decides whether it may pass.
 */
export function messagesToChatRequest(req: MessagesRequest): ChatCompletionRequest {
  const out: ChatCompletionRequest = { model: req.model, ...chatPrompt(req), max_tokens: req.max_tokens };
  if (req.tool_choice) {
    out.tool_choice = chatToolChoice(req.tool_choice);
    if (req.tool_choice.type !== "none" && req.tool_choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false;
  }
  if (req.stop_sequences && req.stop_sequences.length > 0) out.stop = req.stop_sequences;
  if (req.temperature !== undefined) out.temperature = req.temperature;
  if (req.top_p !== undefined) out.top_p = req.top_p;
  if (req.top_k !== undefined) out.top_k = req.top_k;
  if (typeof req.metadata?.user_id === "string") out.user = req.metadata.user_id;
  if (req.stream === true) {
    out.stream = true;
    out.stream_options = { include_usage: true };
  }
  return out;
}

/** count_tokens' answer: the shared estimate (tokens.ts) of the prompt the translated request renders. */
export function estimateMessagesInputTokens(req: CountTokensRequest): number {
  return estimatePromptTokens(chatPrompt(req));
}

// ---------------------------------------------------------------- response

/** Anthropic's ID for a completion: the chat ID's own part, so logs of both sides match. */
export function messageIdOf(chatId: string): string {
  const own = chatId.replace(/^chatcmpl-/, "");
  return `msg_${own.length > 0 ? own : randomToken(24)}`;
}

const newToolUseId = (): string => `toolu_${randomToken(24)}`;

/**
 * vLLM puts the stop string that ended a completion in the choice's `stop_reason`
 * (a token ID when a stop token did, null for EOS), which is exactly Anthropic's
 * `stop_sequence`. A completion that made tool calls is `tool_use` whatever its
 * finish_reason: vLLM answers a forced (`any`/named) tool choice with "stop", and the
 * client must still run the tools. content_filter has no Anthropic counterpart but a
 * finished turn.
 */
export function stopReasonOf(
  finishReason: string | null | undefined,
  engineStopReason: string | number | null | undefined,
  madeToolCalls: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  if (madeToolCalls || finishReason === "tool_calls" || finishReason === "function_call") {
    return { stop_reason: "tool_use", stop_sequence: null };
  }
  if (finishReason === "length") return { stop_reason: "max_tokens", stop_sequence: null };
  if (finishReason === "stop" && typeof engineStopReason === "string") {
    return { stop_reason: "stop_sequence", stop_sequence: engineStopReason };
  }
  return { stop_reason: "end_turn", stop_sequence: null };
}

/** Chat usage counts cached tokens inside prompt_tokens; Anthropic counts them beside input_tokens. */
export function messagesUsageOf(usage: UsageType | null | undefined): MessagesUsage {
  const prompt = usage?.prompt_tokens ?? 0;
  const cached = Math.min(prompt, usage?.prompt_tokens_details?.cached_tokens ?? 0);
  return {
    input_tokens: prompt - cached,
    output_tokens: usage?.completion_tokens ?? 0,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cached,
  };
}

/**
 * A tool call's arguments as Anthropic's `input` object. Arguments that are not a
 * JSON object (an engine's tool parser can cut or garble them) become `{}`: the
 * client's tool then refuses the call and the agent can retry, where failing the
 * whole answer would lose the turn's text and every other call with it.
 */
export function toolInputOf(args: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(args);
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Just what the translation reads from a completion's choice. */
const CompletionChoice = z.looseObject({
  message: z
    .looseObject({
      content: z.string().nullish(),
      refusal: z.string().nullish(),
      tool_calls: z.array(ToolCall).nullish(),
    })
    .nullish(),
  finish_reason: z.string().nullish(),
  stop_reason: z.union([z.string(), z.number()]).nullish(),
});

/** A chat completion as Anthropic's message; only choice 0 counts (chat.ts allows n = 1 only). */
export function chatCompletionToMessage(completion: ChatCompletion): MessagesResponse {
  const parsed = CompletionChoice.safeParse(completion.choices.find((c) => c.index === 0));
  const choice = parsed.success ? parsed.data : undefined;
  const content: ResponseContentBlock[] = [];
  // A refusal is the model's answer to the turn: shown as its text rather than lost.
  const text = choice?.message?.content || choice?.message?.refusal || "";
  if (text.length > 0) content.push({ type: "text", text });
  const calls = choice?.message?.tool_calls ?? [];
  for (const call of calls) {
    content.push({
      type: "tool_use",
      id: call.id.length > 0 ? call.id : newToolUseId(),
      name: call.function.name,
      input: toolInputOf(call.function.arguments),
    });
  }
  return {
    id: messageIdOf(completion.id),
    type: "message",
    role: "assistant",
    content,
    model: completion.model,
    ...stopReasonOf(choice?.finish_reason, choice?.stop_reason, calls.length > 0),
    usage: messagesUsageOf(completion.usage),
  };
}

// ---------------------------------------------------------------- stream

/** Just what the stream translation reads from a chunk. */
const ChunkView = z.looseObject({
  id: z.string().optional(),
  model: z.string().optional(),
  choices: z
    .array(
      z.looseObject({
        index: z.number(),
        delta: z
          .looseObject({
            content: z.string().nullish(),
            tool_calls: z.array(ToolCallDelta).nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
        stop_reason: z.union([z.string(), z.number()]).nullish(),
      }),
    )
    .nullish(),
  usage: Usage.nullish(),
});
type ChunkView = z.infer<typeof ChunkView>;

interface ToolEntry {
  id: string | undefined;
  name: string | undefined;
  arguments: string;
}

type LiveBlock = { kind: "text"; index: number } | { kind: "tool"; index: number; entry: ToolEntry };
type HeldBlock = { kind: "text"; text: string } | { kind: "tool"; entry: ToolEntry };

export interface MessagesStreamOptions {
  /** The model named in message_start when no chunk came (finish() on an empty stream). */
  model?: string;
  /** message_start's input_tokens when the first chunk carries no usage (e.g. the edge's estimate); 0 if absent. */
  inputTokens?: number;
}

/**
 * Turns a chat-completions stream into Anthropic's events, chunk by chunk: push() each
 * parsed `data:` payload, finish() when the stream ends ([DONE] or the end of the body).
 *
 * Anthropic's blocks come one after another (start, deltas, stop, then the next), and
 * clients rely on it; a chat stream may interleave tool calls by index, and text can
 * follow them. So one block is live at a time, streamed as it comes: text until the
 * first tool call, then that call. Whatever arrives while a tool call is live (other
 * calls, later text) is held and emitted whole, each as its own block, once the live
 * block closes at the finish_reason. A live text block can close early because text
 * can continue in a later block; a tool call cannot, since its arguments must be one
 * block. Nothing is lost or reordered within a block; a second tool call's arguments
 * just arrive in one delta instead of many.
 *
 * Streamed arguments are relayed as the engine wrote them (a stream cannot take back
 * a delta), unlike chatCompletionToMessage, which parses them.
 *
 * message_delta and message_stop wait for the usage chunk that follows the
 * finish_reason (the translated request asks for it), so message_delta carries the
 * engine's final counts; without one, finish() sends the last counts seen.
 */
export class ChatToMessagesStream {
  private readonly options: MessagesStreamOptions;
  private started = false;
  /** open: blocks may come; closed: the finish_reason came, waiting for usage; ended: message_stop (or error) sent. */
  private phase: "open" | "closed" | "ended" = "open";
  private nextIndex = 0;
  private live: LiveBlock | undefined;
  private held: HeldBlock[] = [];
  private readonly tools = new Map<number, ToolEntry>();
  private usage: UsageType | undefined;
  private stop: { stop_reason: StopReason; stop_sequence: string | null } | undefined;

  constructor(options: MessagesStreamOptions = {}) {
    this.options = options;
  }

  /** Whether message_stop (or an error event) has been emitted: nothing more will be. */
  get ended(): boolean {
    return this.phase === "ended";
  }

  /** The events one chat chunk (or an OpenAI-shaped error payload) yields; unreadable payloads yield none. */
  push(payload: unknown): MessagesStreamEvent[] {
    if (this.phase === "ended") return [];
    const error = OpenAIErrorBody.safeParse(payload);
    if (error.success) {
      // A stream's error has no status of its own: the edge and the pool send them for a broken or timed-out call.
      this.phase = "ended";
      return [messagesErrorBody(500, error.data)];
    }
    const parsed = ChunkView.safeParse(payload);
    if (!parsed.success) return [];
    const chunk = parsed.data;
    const events: MessagesStreamEvent[] = [];
    if (!this.started) events.push(this.messageStart(chunk));
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.find((c) => c.index === 0);
    if (choice && this.phase === "open") {
      if (choice.delta?.content) this.text(choice.delta.content, events);
      for (const call of choice.delta?.tool_calls ?? []) this.toolCall(call, events);
      if (choice.finish_reason) {
        this.stop = stopReasonOf(choice.finish_reason, choice.stop_reason, this.tools.size > 0);
        this.closeBlocks(events);
        this.phase = "closed";
      }
    }
    // The usage chunk: no choices, after the finish_reason.
    if (this.phase === "closed" && chunk.usage && (chunk.choices ?? []).length === 0) this.end(events);
    return events;
  }

  /** The events that end the message once the chat stream is over; none if it already ended. */
  finish(): MessagesStreamEvent[] {
    if (this.phase === "ended") return [];
    const events: MessagesStreamEvent[] = [];
    if (!this.started) events.push(this.messageStart(undefined));
    if (this.phase === "open") {
      // No finish_reason came: the turn ended as far as the engine said anything about it.
      this.stop = stopReasonOf(undefined, undefined, this.tools.size > 0);
      this.closeBlocks(events);
    }
    this.end(events);
    return events;
  }

  private messageStart(chunk: ChunkView | undefined): MessagesStreamEvent {
    this.started = true;
    const usage = chunk?.usage
      ? { ...messagesUsageOf(chunk.usage), output_tokens: 0 }
      : { ...messagesUsageOf(undefined), input_tokens: this.options.inputTokens ?? 0 };
    return {
      type: "message_start",
      message: {
        id: chunk?.id ? messageIdOf(chunk.id) : `msg_${randomToken(24)}`,
        type: "message",
        role: "assistant",
        content: [],
        model: chunk?.model ?? this.options.model ?? "",
        stop_reason: null,
        stop_sequence: null,
        usage,
      },
    };
  }

  private text(text: string, events: MessagesStreamEvent[]): void {
    if (this.live?.kind === "tool") {
      const last = this.held.at(-1);
      if (last?.kind === "text") last.text += text;
      else this.held.push({ kind: "text", text });
      return;
    }
    if (!this.live) this.live = { kind: "text", index: this.startBlock({ type: "text", text: "" }, events) };
    events.push(delta(this.live.index, { type: "text_delta", text }));
  }

  private toolCall(
    call: ToolCallDelta,
    events: MessagesStreamEvent[],
  ): void {
    const piece = call.function?.arguments ?? "";
    let entry = this.tools.get(call.index);
    const isNew = entry === undefined;
    if (!entry) {
      entry = { id: undefined, name: undefined, arguments: "" };
      this.tools.set(call.index, entry);
    }
    // Engines send the ID and name on a call's first delta; keep the first ones seen.
    entry.id ??= call.id || undefined;
    entry.name ??= call.function?.name || undefined;
    entry.arguments += piece;
    if (this.live?.kind === "tool" && this.live.entry === entry) {
      if (piece.length > 0) events.push(delta(this.live.index, { type: "input_json_delta", partial_json: piece }));
      return;
    }
    if (!isNew) return; // held: its arguments accumulate until the live block closes
    if (this.live?.kind === "tool" || entry.name === undefined) {
      this.held.push({ kind: "tool", entry });
      return;
    }
    if (this.live) events.push({ type: "content_block_stop", index: this.live.index });
    const index = this.startBlock(this.toolUseStart(entry), events);
    this.live = { kind: "tool", index, entry };
    if (entry.arguments.length > 0) events.push(delta(index, { type: "input_json_delta", partial_json: entry.arguments }));
  }

  private toolUseStart(entry: ToolEntry): ResponseContentBlock {
    entry.id ??= newToolUseId();
    return { type: "tool_use", id: entry.id, name: entry.name ?? "", input: {} };
  }

  private startBlock(block: ResponseContentBlock, events: MessagesStreamEvent[]): number {
    const index = this.nextIndex++;
    events.push({ type: "content_block_start", index, content_block: block });
    return index;
  }

  private closeBlocks(events: MessagesStreamEvent[]): void {
    if (this.live) events.push({ type: "content_block_stop", index: this.live.index });
    this.live = undefined;
    for (const block of this.held) {
      if (block.kind === "text") {
        const index = this.startBlock({ type: "text", text: "" }, events);
        events.push(delta(index, { type: "text_delta", text: block.text }));
        events.push({ type: "content_block_stop", index });
      } else {
        const index = this.startBlock(this.toolUseStart(block.entry), events);
        if (block.entry.arguments.length > 0) {
          events.push(delta(index, { type: "input_json_delta", partial_json: block.entry.arguments }));
        }
        events.push({ type: "content_block_stop", index });
      }
    }
    this.held = [];
  }

  private end(events: MessagesStreamEvent[]): void {
    const stop = this.stop ?? stopReasonOf(undefined, undefined, this.tools.size > 0);
    events.push({
      type: "message_delta",
      delta: stop,
      usage: this.usage ? messagesUsageOf(this.usage) : { output_tokens: 0 },
    });
    events.push({ type: "message_stop" });
    this.phase = "ended";
  }
}

function delta(index: number, d: ContentBlockDelta): MessagesStreamEvent {
  return { type: "content_block_delta", index, delta: d };
}
