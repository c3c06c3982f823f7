import { describe, expect, it } from "vitest";
import { ChatCompletion, ChatCompletionRequest } from "../../src/protocol/chat.js";
import { openAIErrorBody } from "../../src/protocol/errors.js";
import {
  COUNT_TOKENS_REQUEST_FIELDS,
  ContentBlock,
  CountTokensRequest,
  formatMessagesEvent,
  MESSAGES_ERROR_STATUS,
  MESSAGES_REQUEST_FIELDS,
  MessagesErrorBody,
  messagesErrorBody,
  MessagesRequest,
  MessagesResponse,
  type MessagesStreamEvent,
  MessagesStreamEvent as MessagesStreamEventSchema,
  unknownRequestFields,
} from "../../src/protocol/messages.js";
import { estimatePromptTokens } from "../../src/protocol/tokens.js";
import {
  ChatToMessagesStream,
  chatCompletionToMessage,
  estimateMessagesInputTokens,
  messagesToChatRequest,
} from "../../src/protocol/translate/messages-chat.js";

const base = { model: "m", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };

const weather = {
  name: "get_weather",
  description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

function completion(choice: Record<string, unknown>, usage?: Record<string, unknown>): ChatCompletion {
  return ChatCompletion.parse({
    id: "chatcmpl-abc123",
    object: "chat.completion",
    created: 1,
    model: "m",
    choices: [{ index: 0, ...choice }],
    ...(usage ? { usage } : {}),
  });
}

function chunk(choice: Record<string, unknown> | undefined, usage?: Record<string, unknown>): unknown {
  return {
    id: "chatcmpl-s1",
    object: "chat.completion.chunk",
    created: 1,
    model: "m",
    choices: choice ? [{ index: 0, finish_reason: null, ...choice }] : [],
    ...(usage ? { usage } : {}),
  };
}

const usage = (prompt: number, completion: number, cached: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: cached },
});

describe("Messages request schema", () => {
  it("exports the accepted top-level fields", () => {
    expect([...MESSAGES_REQUEST_FIELDS].sort()).toEqual(
      [
        "max_tokens",
        "messages",
        "metadata",
        "model",
        "stop_sequences",
        "stream",
        "system",
        "temperature",
        "tool_choice",
        "tools",
        "top_k",
        "top_p",
        "thinking",
        "service_tier",
      ].sort(),
    );
    expect(COUNT_TOKENS_REQUEST_FIELDS.has("max_tokens")).toBe(false);
    expect(COUNT_TOKENS_REQUEST_FIELDS.has("stream")).toBe(false);
    expect(COUNT_TOKENS_REQUEST_FIELDS.size).toBe(MESSAGES_REQUEST_FIELDS.size - 2);
  });

  it("keeps unknown top-level keys so they can be refused by name", () => {
    // thinking and service_tier are Anthropic's and accepted (Claude Code sends them); a server tool's container is not.
    const parsed = MessagesRequest.parse({ ...base, thinking: { type: "enabled", budget_tokens: 1024 }, service_tier: "auto", container: "c1", mcp_servers: [] });
    expect(unknownRequestFields(parsed)).toEqual(["container", "mcp_servers"]);
    expect(unknownRequestFields(MessagesRequest.parse(base))).toEqual([]);
    const counted = CountTokensRequest.parse({ model: "m", messages: base.messages, max_tokens: 5 });
    expect(unknownRequestFields(counted, COUNT_TOKENS_REQUEST_FIELDS)).toEqual(["max_tokens"]);
  });

  it("accepts cache_control and thinking history in blocks", () => {
    const result = MessagesRequest.safeParse({
      ...base,
      system: [{ type: "text", text: "s", cache_control: { type: "ephemeral" } }],
      messages: [
        { role: "user", content: "q" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hmm", signature: "sig" },
            { type: "redacted_thinking", data: "xx" },
            { type: "text", text: "a" },
          ],
        },
      ],
    });
    expect(result.success).toBe(true);
  });

  it.each([
    [{ model: "m", messages: base.messages }, "max_tokens"],
    [{ ...base, messages: [{ role: "system", content: "x" }] }, "messages.0.role"],
    [{ ...base, messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }, "messages.0.content"],
    [{ ...base, tools: [{ type: "web_search_20250305", name: "web_search" }] }, "tools.0.type"],
    [{ ...base, tool_choice: { type: "tool" } }, "tool_choice.name"],
    [{ ...base, temperature: 1.5 }, "temperature"],
    [{ ...base, stop_sequences: ["a", "b", "c", "d", "e"] }, "stop_sequences"],
    [{ ...base, metadata: { user_id: "u", other: 1 } }, "metadata"],
    [{ ...base, messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f" } }] }] }, "messages.0.content"],
  ])("rejects %j at %s", (body, path) => {
    const result = MessagesRequest.safeParse(body);
    expect(result.success).toBe(false);
    if (result.success) return;
    // A string-or-blocks union names the content field itself, as chat.ts's does.
    expect(result.error.issues[0]?.path.join(".")).toBe(path);
  });

  it("refuses a Files-API image source, naming it", () => {
    const result = ContentBlock.safeParse({ type: "image", source: { type: "file", file_id: "f" } });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(["source", "type"]);
  });
});

describe("Messages request → chat request", () => {
  it("maps every scalar field", () => {
    const req = MessagesRequest.parse({
      ...base,
      system: "be brief",
      stop_sequences: ["END"],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      stream: true,
      metadata: { user_id: "user-7" },
    });
    expect(messagesToChatRequest(req)).toStrictEqual({
      model: "m",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hi" },
      ],
      max_tokens: 64,
      stop: ["END"],
      temperature: 0.5,
      top_p: 0.9,
      top_k: 40,
      user: "user-7",
      stream: true,
      stream_options: { include_usage: true },
    });
  });

  it("maps a minimal request to a minimal one", () => {
    expect(messagesToChatRequest(MessagesRequest.parse(base))).toStrictEqual({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 64,
    });
  });

  it("maps system blocks: one becomes a string, several stay text parts", () => {
    const one = messagesToChatRequest(
      MessagesRequest.parse({ ...base, system: [{ type: "text", text: "only", cache_control: { type: "ephemeral" } }] }),
    );
    expect(one.messages[0]).toStrictEqual({ role: "system", content: "only" });
    const two = messagesToChatRequest(
      MessagesRequest.parse({ ...base, system: [{ type: "text", text: "a" }, { type: "text", text: "b" }] }),
    );
    expect(two.messages[0]).toStrictEqual({
      role: "system",
      content: [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ],
    });
    expect(messagesToChatRequest(MessagesRequest.parse({ ...base, system: "" })).messages).toHaveLength(1);
  });

  it("maps images to image_url parts (base64 as a data: URL)", () => {
    const req = MessagesRequest.parse({
      ...base,
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "what are these?" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
            { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
          ],
        },
      ],
    });
    expect(messagesToChatRequest(req).messages).toStrictEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "what are these?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
          { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } },
        ],
      },
    ]);
  });

  it("maps a tool_use → tool_result round trip, tool messages in order before the user's text", () => {
    const req = MessagesRequest.parse({
      ...base,
      tools: [weather],
      tool_choice: { type: "auto" },
      messages: [
        { role: "user", content: "Weather in Paris and Rome?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "two calls", signature: "s" },
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "call_2", name: "get_weather", input: { city: "Rome" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "call_1", content: "18C" },
            {
              type: "tool_result",
              tool_use_id: "call_2",
              content: [
                { type: "text", text: "22C" },
                { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
              ],
              is_error: false,
            },
            { type: "text", text: "Which is warmer?" },
          ],
        },
      ],
    });
    const chat = messagesToChatRequest(req);
    expect(chat.tools).toStrictEqual([
      {
        type: "function",
        function: { name: "get_weather", description: "Weather for a city", parameters: weather.input_schema },
      },
    ]);
    expect(chat.tool_choice).toBe("auto");
    expect(chat.messages).toStrictEqual([
      { role: "user", content: "Weather in Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "call_2", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "18C" },
      { role: "tool", tool_call_id: "call_2", content: "22C" },
      {
        role: "user",
        content: [
          { type: "image_url", image_url: { url: "data:image/jpeg;base64,AAAA" } },
          { type: "text", text: "Which is warmer?" },
        ],
      },
    ]);
    // The translation is a valid chat request by Agentix's own schema.
    expect(ChatCompletionRequest.safeParse(chat).success).toBe(true);
  });

  it("gives an assistant turn of tool calls only null content, and a results-only turn no user message", () => {
    const chat = messagesToChatRequest(
      MessagesRequest.parse({
        ...base,
        messages: [
          { role: "user", content: "go" },
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "ls", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t1" }] },
        ],
      }),
    );
    expect(chat.messages.slice(1)).toStrictEqual([
      { role: "assistant", content: null, tool_calls: [{ id: "t1", type: "function", function: { name: "ls", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "t1", content: "" },
    ]);
  });

  it.each([
    [{ type: "auto" }, "auto", undefined],
    [{ type: "auto", disable_parallel_tool_use: true }, "auto", false],
    [{ type: "any" }, "required", undefined],
    [{ type: "tool", name: "get_weather" }, { type: "function", function: { name: "get_weather" } }, undefined],
    [{ type: "none" }, "none", undefined],
  ])("maps tool_choice %j", (choice, expected, parallel) => {
    const chat = messagesToChatRequest(MessagesRequest.parse({ ...base, tools: [weather], tool_choice: choice }));
    expect(chat.tool_choice).toStrictEqual(expected);
    expect(chat.parallel_tool_calls).toBe(parallel);
  });

  it("estimates count_tokens on the translated prompt", () => {
    const body = {
      model: "m",
      system: "sys",
      tools: [weather],
      messages: [{ role: "user", content: [{ type: "text", text: "a".repeat(40) }] }],
    };
    const tokens = estimateMessagesInputTokens(CountTokensRequest.parse(body));
    const chat = messagesToChatRequest(MessagesRequest.parse({ ...body, max_tokens: 1 }));
    expect(tokens).toBe(estimatePromptTokens(chat));
    const rendered = `<tools>${JSON.stringify(chat.tools)}</tools>\n<|system|>sys<|end|>\n<|user|>${"a".repeat(40)}<|end|>\n`;
    expect(tokens).toBe(Math.ceil(rendered.length / 4));
  });
});

describe("chat completion → Messages response", () => {
  it("maps text, usage with cached tokens, and the ID", () => {
    const message = chatCompletionToMessage(
      completion({ message: { role: "assistant", content: "Hello." }, finish_reason: "stop" }, usage(100, 7, 60)),
    );
    expect(message).toStrictEqual({
      id: "msg_abc123",
      type: "message",
      role: "assistant",
      content: [{ type: "text", text: "Hello." }],
      model: "m",
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 40, output_tokens: 7, cache_creation_input_tokens: 0, cache_read_input_tokens: 60 },
    });
    expect(MessagesResponse.safeParse(message).success).toBe(true);
  });

  it.each([
    ["stop", null, "end_turn", null],
    ["stop", "END", "stop_sequence", "END"],
    ["stop", 128009, "end_turn", null],
    ["length", null, "max_tokens", null],
    ["content_filter", null, "end_turn", null],
    [null, null, "end_turn", null],
  ])("maps finish_reason %s (stop_reason %s) to %s", (finish, stop, reason, sequence) => {
    const message = chatCompletionToMessage(
      completion({ message: { role: "assistant", content: "x" }, finish_reason: finish, stop_reason: stop }, usage(1, 1, 0)),
    );
    expect([message.stop_reason, message.stop_sequence]).toEqual([reason, sequence]);
  });

  it("maps tool calls to tool_use blocks with parsed input; bad JSON becomes {}", () => {
    const message = chatCompletionToMessage(
      completion(
        {
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
              { id: "call_b", type: "function", function: { name: "get_weather", arguments: '{"city": "Ro' } },
              { id: "call_c", type: "function", function: { name: "ls", arguments: "[1,2]" } },
            ],
          },
          finish_reason: "tool_calls",
        },
        usage(10, 5, 0),
      ),
    );
    expect(message.content).toStrictEqual([
      { type: "tool_use", id: "call_a", name: "get_weather", input: { city: "Paris" } },
      { type: "tool_use", id: "call_b", name: "get_weather", input: {} },
      { type: "tool_use", id: "call_c", name: "ls", input: {} },
    ]);
    expect(message.stop_reason).toBe("tool_use");
  });

  it("says tool_use when a forced tool choice finished with stop", () => {
    const message = chatCompletionToMessage(
      completion({
        message: {
          role: "assistant",
          content: "",
          tool_calls: [{ id: "", type: "function", function: { name: "ls", arguments: "{}" } }],
        },
        finish_reason: "stop",
      }),
    );
    expect(message.stop_reason).toBe("tool_use");
    expect(message.content).toHaveLength(1);
    expect(message.content[0]).toMatchObject({ type: "tool_use", name: "ls", input: {} });
    expect((message.content[0] as { id: string }).id).toMatch(/^toolu_[0-9A-Za-z]{24}$/);
    // No usage from the engine: zeros, not a guess.
    expect(message.usage).toStrictEqual({ input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });
});

describe("chat stream → Messages events", () => {
  function run(chunks: unknown[], finish = true, options = {}): MessagesStreamEvent[] {
    const stream = new ChatToMessagesStream(options);
    const events = chunks.flatMap((c) => stream.push(c));
    if (finish) events.push(...stream.finish());
    for (const event of events) expect(MessagesStreamEventSchema.safeParse(event).success).toBe(true);
    return events;
  }

  it("streams text, then message_delta with the final usage and message_stop", () => {
    const events = run([
      chunk({ delta: { role: "assistant", content: "" } }),
      chunk({ delta: { content: "Hel" } }),
      chunk({ delta: { content: "lo" } }),
      chunk({ delta: {}, finish_reason: "stop" }),
      chunk(undefined, usage(30, 2, 10)),
    ], false);
    expect(events).toStrictEqual([
      {
        type: "message_start",
        message: {
          id: "msg_s1",
          type: "message",
          role: "assistant",
          content: [],
          model: "m",
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
        },
      },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } },
      { type: "content_block_stop", index: 0 },
      {
        type: "message_delta",
        delta: { stop_reason: "end_turn", stop_sequence: null },
        usage: { input_tokens: 20, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 10 },
      },
      { type: "message_stop" },
    ]);
  });

  it("closes the blocks at the finish_reason and the message at the usage chunk after it", () => {
    const stream = new ChatToMessagesStream();
    stream.push(chunk({ delta: { content: "a" } }));
    expect(stream.push(chunk({ delta: {}, finish_reason: "length" }, usage(3, 1, 0)))).toStrictEqual([
      { type: "content_block_stop", index: 0 },
    ]);
    expect(stream.ended).toBe(false);
    expect(stream.push(chunk(undefined, usage(3, 2, 1)))).toStrictEqual([
      {
        type: "message_delta",
        delta: { stop_reason: "max_tokens", stop_sequence: null },
        usage: { input_tokens: 2, output_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 1 },
      },
      { type: "message_stop" },
    ]);
    expect(stream.ended).toBe(true);
    expect(stream.finish()).toEqual([]);
  });

  it("takes message_start's input tokens from the first chunk's usage, else the option", () => {
    const withUsage = run([chunk({ delta: { content: "x" } }, usage(12, 1, 4))], false);
    expect(withUsage[0]).toMatchObject({ message: { usage: { input_tokens: 8, output_tokens: 0, cache_read_input_tokens: 4 } } });
    const withOption = run([chunk({ delta: { content: "x" } })], false, { inputTokens: 33 });
    expect(withOption[0]).toMatchObject({ message: { usage: { input_tokens: 33, output_tokens: 0 } } });
  });

  it("streams text then two tool calls interleaved by index, one block per call", () => {
    const call = (index: number, fn: Record<string, unknown>, id?: string) =>
      chunk({ delta: { tool_calls: [{ index, ...(id ? { id, type: "function" } : {}), function: fn }] } });
    const events = run([
      chunk({ delta: { role: "assistant", content: "Let me check." } }),
      call(0, { name: "get_weather", arguments: "" }, "call_a"),
      call(0, { arguments: '{"city":' }),
      call(1, { name: "get_time", arguments: '{"tz":' }, "call_b"),
      call(0, { arguments: '"Paris"}' }),
      call(1, { arguments: '"CET"}' }),
      chunk({ delta: {}, finish_reason: "tool_calls" }),
      chunk(undefined, usage(50, 20, 0)),
    ]);
    expect(events.slice(1)).toStrictEqual([
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Let me check." } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "call_a", name: "get_weather", input: {} } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '{"city":' } },
      { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: '"Paris"}' } },
      { type: "content_block_stop", index: 1 },
      { type: "content_block_start", index: 2, content_block: { type: "tool_use", id: "call_b", name: "get_time", input: {} } },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: '{"tz":"CET"}' } },
      { type: "content_block_stop", index: 2 },
      {
        type: "message_delta",
        delta: { stop_reason: "tool_use", stop_sequence: null },
        usage: { input_tokens: 50, output_tokens: 20, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
      { type: "message_stop" },
    ]);
  });

  it("ends a stream that stopped without a finish_reason on finish()", () => {
    const stream = new ChatToMessagesStream();
    const pushed = [
      chunk({ delta: { content: "partial" } }, usage(5, 3, 0)),
      chunk({ delta: { tool_calls: [{ index: 0, id: "call_z", function: { name: "ls", arguments: '{"p":1}' } }] } }, usage(5, 4, 0)),
    ].flatMap((c) => stream.push(c));
    expect(pushed.map((e) => e.type)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
    ]);
    expect(stream.ended).toBe(false);
    expect(stream.finish()).toStrictEqual([
      { type: "content_block_stop", index: 1 },
      {
        type: "message_delta",
        delta: { stop_reason: "tool_use", stop_sequence: null },
        usage: { input_tokens: 5, output_tokens: 4, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
      },
      { type: "message_stop" },
    ]);
    expect(stream.ended).toBe(true);
    expect(stream.finish()).toEqual([]);
    expect(stream.push(chunk({ delta: { content: "late" } }))).toEqual([]);
  });

  it("ends a text stream without finish_reason or usage as end_turn with zero output", () => {
    const events = run([chunk({ delta: { content: "a" } })]);
    expect(events.slice(-3)).toStrictEqual([
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 0 } },
      { type: "message_stop" },
    ]);
  });

  it("gives an empty stream a well-formed message", () => {
    const events = run([], true, { model: "fallback" });
    expect(events.map((e) => e.type)).toEqual(["message_start", "message_delta", "message_stop"]);
    expect(events[0]).toMatchObject({ message: { model: "fallback", content: [], usage: { input_tokens: 0 } } });
  });

  it("holds text that follows a live tool call and emits it as its own block", () => {
    const events = run([
      chunk({ delta: { tool_calls: [{ index: 0, id: "c0", function: { name: "ls", arguments: "{}" } }] } }),
      chunk({ delta: { content: "after" } }),
      chunk({ delta: { content: " tools" } }),
      chunk({ delta: {}, finish_reason: "stop", stop_reason: null }),
    ]);
    expect(events.slice(1)).toStrictEqual([
      { type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "c0", name: "ls", input: {} } },
      { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{}" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "after tools" } },
      { type: "content_block_stop", index: 1 },
      { type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { output_tokens: 0 } },
      { type: "message_stop" },
    ]);
  });

  it("reports a stop sequence and max_tokens", () => {
    const stopped = run([chunk({ delta: { content: "a" } }), chunk({ delta: {}, finish_reason: "stop", stop_reason: "###" })]);
    expect(stopped.at(-2)).toMatchObject({ delta: { stop_reason: "stop_sequence", stop_sequence: "###" } });
    const cut = run([chunk({ delta: { content: "a" } }), chunk({ delta: {}, finish_reason: "length" })]);
    expect(cut.at(-2)).toMatchObject({ delta: { stop_reason: "max_tokens", stop_sequence: null } });
  });

  it("turns an error payload mid-stream into an error event and ends", () => {
    const stream = new ChatToMessagesStream();
    stream.push(chunk({ delta: { content: "a" } }));
    const events = stream.push(openAIErrorBody(502, "The call ran past its time limit", { code: "call_timeout" }));
    expect(events).toStrictEqual([{ type: "error", error: { type: "api_error", message: "The call ran past its time limit" } }]);
    expect(stream.ended).toBe(true);
    expect(stream.finish()).toEqual([]);
  });

  it("ignores payloads that are not chunks", () => {
    const stream = new ChatToMessagesStream();
    expect(stream.push("[DONE]")).toEqual([]);
    expect(stream.push({ choices: "nope" })).toEqual([]);
  });

  it("formats an event as Anthropic's SSE", () => {
    expect(formatMessagesEvent({ type: "content_block_stop", index: 2 })).toBe(
      'event: content_block_stop\ndata: {"type":"content_block_stop","index":2}\n\n',
    );
    expect(formatMessagesEvent({ type: "ping" })).toBe('event: ping\ndata: {"type":"ping"}\n\n');
  });
});

describe("errors", () => {
  it.each([
    [400, "invalid_request_error"],
    [401, "authentication_error"],
    [403, "permission_error"],
    [404, "not_found_error"],
    [409, "invalid_request_error"],
    [413, "request_too_large"],
    [429, "rate_limit_error"],
    [500, "api_error"],
    [502, "api_error"],
    [503, "overloaded_error"],
    [504, "api_error"],
    [529, "overloaded_error"],
  ])("maps status %i to %s", (status, type) => {
    const body = messagesErrorBody(status, openAIErrorBody(status, "why"));
    expect(body).toStrictEqual({ type: "error", error: { type, message: "why" } });
    expect(MessagesErrorBody.safeParse(body).success).toBe(true);
  });

  it("keeps the OpenAI message and takes a plain string", () => {
    const openai = openAIErrorBody(400, "Unrecognized request argument supplied: thinking.", {
      code: "unsupported_parameter",
      param: "thinking",
    });
    expect(messagesErrorBody(400, openai)).toStrictEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "Unrecognized request argument supplied: thinking." },
    });
    expect(messagesErrorBody(529, "Overloaded")).toStrictEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } });
  });

  it("lists Anthropic's statuses per type", () => {
    for (const [type, status] of Object.entries(MESSAGES_ERROR_STATUS)) {
      expect(messagesErrorBody(status, "x").error.type).toBe(type);
    }
  });
});
