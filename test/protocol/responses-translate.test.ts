import OpenAI from "openai";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatCompletion, ChatCompletionRequest, REQUEST_FIELDS } from "../../src/protocol/chat.js";
import { invalidRequest, openAIErrorBody } from "../../src/protocol/errors.js";
import {
  formatResponsesEvent,
  InputItem,
  RESPONSES_REQUEST_FIELDS,
  ResponseObject,
  ResponsesRequest,
  type ResponseStreamEvent,
  ResponseStreamEvent as ResponseStreamEventSchema,
  unknownResponsesFields,
} from "../../src/protocol/responses.js";
import { eventData } from "../../src/protocol/sse.js";
import {
  ChatToResponsesStream,
  chatCompletionToResponse,
  conversationItemsOf,
  responsesToChatRequest,
} from "../../src/protocol/translate/responses-chat.js";

const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: true,
};

const request = (body: Record<string, unknown>): ResponsesRequest => ResponsesRequest.parse({ model: "m", ...body });

const usage = (prompt: number, completion: number, cached: number, reasoning?: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
  prompt_tokens_details: { cached_tokens: cached },
  ...(reasoning !== undefined ? { completion_tokens_details: { reasoning_tokens: reasoning } } : {}),
});

function completion(id: string, message: Record<string, unknown>, finish_reason: string, u?: Record<string, unknown>): ChatCompletion {
  return ChatCompletion.parse({
    id,
    object: "chat.completion",
    created: 1700000000,
    model: "m",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason }],
    ...(u ? { usage: u } : {}),
  });
}

function chunk(delta: Record<string, unknown> | undefined, finish_reason: string | null = null, u?: Record<string, unknown>): unknown {
  return {
    id: "chatcmpl-s1",
    object: "chat.completion.chunk",
    created: 1700000001,
    model: "m",
    choices: delta ? [{ index: 0, delta, finish_reason }] : [],
    ...(u ? { usage: u } : {}),
  };
}

function run(stream: ChatToResponsesStream, payloads: unknown[], finish = true): ResponseStreamEvent[] {
  const events = payloads.flatMap((p) => stream.push(p));
  return finish ? [...events, ...stream.finish()] : events;
}

const types = (events: ResponseStreamEvent[]): string[] => events.map((e) => e.type);

/** An OpenAI client whose every request is answered by `answer` (no network). */
function sdkClient(answer: () => Response): OpenAI {
  return new OpenAI({ apiKey: "k", baseURL: "http://agentix.test/v1", maxRetries: 0, fetch: async () => answer() });
}

// ---------------------------------------------------------------- request schema

describe("Responses request schema", () => {
  it("exports exactly the accepted top-level fields", () => {
    expect([...RESPONSES_REQUEST_FIELDS].sort()).toEqual(
      [
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "temperature",
        "top_p",
        "stream",
        "previous_response_id",
        "store",
        "metadata",
        "user",
        "prompt_cache_key",
        "parallel_tool_calls",
        "text",
        "reasoning",
        "include",
        "truncation",
        "service_tier",
        "safety_identifier",
        "stream_options",
      ].sort(),
    );
  });

  it("keeps unknown top-level keys so they can be refused by name", () => {
    // include and service_tier are accepted (Codex sends include); server-side conversations and prompts are not.
    const parsed = request({ input: "hi", service_tier: "auto", include: ["reasoning.encrypted_content"], store: false, conversation: "conv_1", background: true });
    expect(unknownResponsesFields(parsed)).toEqual(["conversation", "background"]);
    expect(unknownResponsesFields(request({ input: "hi", reasoning: { effort: "low", summary: "auto" } }))).toEqual([]);
  });

  it("accepts a request typed by the openai SDK, with the items clients replay", () => {
    const params: OpenAI.Responses.ResponseCreateParamsStreaming = {
      model: "m",
      instructions: "Be brief.",
      input: [
        { role: "user", content: [{ type: "input_text", text: "Look" }, { type: "input_image", image_url: "https://x/a.png", detail: "auto" }] },
        // An output message exactly as response.output holds it.
        { id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "ok", annotations: [] }] },
        { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: "{}", status: "completed" },
        { type: "function_call_output", call_id: "call_1", output: "sunny" },
      ],
      tools: [weatherTool],
      tool_choice: { type: "function", name: "get_weather" },
      text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true }, verbosity: "low" },
      reasoning: { effort: "low" },
      metadata: { run: "1" },
      stream: true,
    };
    const parsed = ResponsesRequest.safeParse(params);
    expect(parsed.success).toBe(true);
    expect(parsed.data?.input).toHaveLength(4);
  });

  it.each([
    [{ input: "x", tools: [{ type: "web_search" }] }, "tools.0.type"],
    [{ input: [{ type: "reasoning", id: "rs_1", summary: [] }] }, "input.0.type"],
    [{ input: [{ type: "item_reference", id: "msg_1" }] }, "input.0.type"],
    [{ input: [{ role: "system", content: [{ type: "input_image", image_url: "https://x/a.png" }] }] }, "input.0.content.0.type"],
    [{ input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] }, "input.0.content.0.image_url"],
    [{ input: [{ role: "user", content: [{ type: "input_file", file_id: "file_1" }] }] }, "input.0.content.0.type"],
    [{ input: [{ role: "tool", content: "x" }] }, "input.0.role"],
    [{ input: [{ type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: "u" }] }] }, "input.0.output"],
    [{ input: "x", tool_choice: { type: "allowed_tools", mode: "auto", tools: [] } }, "tool_choice"],
    [{ input: [] }, "input"],
    [{ input: 5 }, "input"],
    [{ input: [{ role: "user", content: 5 }] }, "input.0.content"],
    [{ input: "x", max_output_tokens: 0 }, "max_output_tokens"],
    [{ input: "x", temperature: 3 }, "temperature"],
  ])("rejects %j at %s", async (body, param) => {
    const result = ResponsesRequest.safeParse({ model: "m", ...body });
    expect(result.success).toBe(false);
    if (result.success) return;
    const json = (await invalidRequest(result.error).getResponse().json()) as { error: { param: string } };
    expect(json.error.param).toBe(param);
  });
});

// ---------------------------------------------------------------- request → chat

describe("Responses request → chat request", () => {
  it("turns a string input and instructions into a system and a user message", () => {
    const chat = responsesToChatRequest(
      request({ instructions: "Be brief.", input: "Hi", max_output_tokens: 64, temperature: 0.2, top_p: 0.9, user: "u1", metadata: { a: "b" }, store: true }),
    );
    expect(chat).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "Hi" },
      ],
      max_tokens: 64,
      temperature: 0.2,
      top_p: 0.9,
      user: "u1",
    });
  });

  it("maps tools, tool choice, formats, effort, the cache key and streaming", () => {
    const chat = responsesToChatRequest(
      request({
        input: [{ role: "developer", content: [{ type: "input_text", text: "Use tools." }] }, { role: "user", content: "Weather?" }],
        tools: [weatherTool, { type: "function", name: "noop", parameters: null, strict: null }],
        tool_choice: { type: "function", name: "get_weather" },
        parallel_tool_calls: false,
        text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } },
        reasoning: { effort: "low", summary: "auto" },
        prompt_cache_key: "agent-7",
        stream: true,
      }),
    );
    expect(chat).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "Use tools." },
        { role: "user", content: "Weather?" },
      ],
      tools: [
        {
          type: "function",
          function: { name: "get_weather", description: "Weather for a city", parameters: weatherTool.parameters, strict: true },
        },
        { type: "function", function: { name: "noop" } },
      ],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      response_format: { type: "json_schema", json_schema: { name: "w", schema: { type: "object" }, strict: true } },
      reasoning_effort: "low",
      user: "agent-7",
      stream: true,
      stream_options: { include_usage: true },
    });
    // What the edge forwards: every key is one of chat.ts's own fields.
    expect(ChatCompletionRequest.safeParse(chat).success).toBe(true);
    expect(Object.keys(chat).filter((key) => !REQUEST_FIELDS.has(key))).toEqual([]);
  });

  it("keeps user over prompt_cache_key, and images as parts", () => {
    const chat = responsesToChatRequest(
      request({
        user: "u1",
        prompt_cache_key: "k",
        input: [{ role: "user", content: [{ type: "input_text", text: "What is it?" }, { type: "input_image", image_url: "data:image/png;base64,AA", detail: "low" }] }],
        text: { format: { type: "json_object" } },
      }),
    );
    expect(chat.user).toBe("u1");
    expect(chat.response_format).toEqual({ type: "json_object" });
    expect(chat.messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "What is it?" },
          { type: "image_url", image_url: { url: "data:image/png;base64,AA", detail: "low" } },
        ],
      },
    ]);
  });

  it("groups an assistant turn's text and function calls into one message, each output a tool message", () => {
    const chat = responsesToChatRequest(
      request({
        input: [
          { role: "user", content: "Paris and Rome?" },
          { type: "message", role: "assistant", id: "msg_x", status: "completed", content: [{ type: "output_text", text: "Checking.", annotations: [] }] },
          { type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}' },
          { type: "function_call", call_id: "call_b", name: "get_weather", arguments: '{"city":"Rome"}', id: "fc_b", status: "completed" },
          { type: "function_call_output", call_id: "call_a", output: "sunny" },
          { type: "function_call_output", call_id: "call_b", output: [{ type: "input_text", text: "rain" }] },
          { type: "function_call", call_id: "call_c", name: "get_weather", arguments: '{"city":"Oslo"}' },
          { type: "function_call_output", call_id: "call_c", output: "snow" },
        ],
      }),
    );
    expect(chat.messages).toEqual([
      { role: "user", content: "Paris and Rome?" },
      {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          { id: "call_b", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: "sunny" },
      { role: "tool", tool_call_id: "call_b", content: "rain" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_c", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
      { role: "tool", tool_call_id: "call_c", content: "snow" },
    ]);
  });

  it("replays an assistant refusal in chat's refusal field", () => {
    const chat = responsesToChatRequest(
      request({ input: [{ role: "user", content: "x" }, { role: "assistant", content: [{ type: "refusal", refusal: "No." }] }, { role: "user", content: "y" }] }),
    );
    expect(chat.messages[1]).toEqual({ role: "assistant", content: null, refusal: "No." });
  });
});

// ---------------------------------------------------------------- completion → response

describe("chat completion → response", () => {
  it("gives text, derived IDs, echoed settings and usage with cached and reasoning tokens", () => {
    const req = request({ instructions: "Be brief.", input: "Hi", metadata: { run: "7" }, tools: [weatherTool], max_output_tokens: 50 });
    const r: OpenAI.Responses.Response = chatCompletionToResponse(
      completion("chatcmpl-abc", { content: "Hello there." }, "stop", usage(100, 20, 80, 5)),
      req,
    );
    expect(r).toMatchObject({
      id: "resp_abc",
      object: "response",
      created_at: 1700000000,
      status: "completed",
      model: "m",
      output: [
        { id: "msg_abc", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Hello there.", annotations: [] }] },
      ],
      output_text: "Hello there.",
      error: null,
      incomplete_details: null,
      instructions: "Be brief.",
      metadata: { run: "7" },
      tools: [{ type: "function", name: "get_weather", description: "Weather for a city", parameters: weatherTool.parameters, strict: true }],
      tool_choice: "auto",
      parallel_tool_calls: true,
      max_output_tokens: 50,
      previous_response_id: null,
      text: { format: { type: "text" } },
    });
    expect(r.usage).toEqual({
      input_tokens: 100,
      input_tokens_details: { cached_tokens: 80, cache_write_tokens: 0 },
      output_tokens: 20,
      output_tokens_details: { reasoning_tokens: 5 },
      total_tokens: 120,
    });
    expect(ResponseObject.safeParse(r).success).toBe(true);
  });

  it("gives one function_call item per tool call, and no message for whitespace before them", () => {
    const calls = [
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      { id: "", type: "function", function: { name: "get_weather", arguments: '{"city":"Rome"}' } },
    ];
    for (const content of [null, "\n\n"]) {
      const r = chatCompletionToResponse(completion("chatcmpl-t1", { content, tool_calls: calls }, "tool_calls"), request({ input: "x" }));
      expect(r.output).toEqual([
        { id: "fc_t1_0", type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" },
        { id: "fc_t1_1", type: "function_call", call_id: "call_t1_1", name: "get_weather", arguments: '{"city":"Rome"}', status: "completed" },
      ]);
      expect(r.output_text).toBe("");
      expect(r.usage).toBeUndefined();
    }
  });

  it("is incomplete on length, the cut item with it", () => {
    const r = chatCompletionToResponse(completion("chatcmpl-l", { content: "Once upon a" }, "length", usage(5, 3, 0)), request({ input: "x", max_output_tokens: 3 }));
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.output[0]?.status).toBe("incomplete");
    const cutCall = chatCompletionToResponse(
      completion("chatcmpl-l2", { content: "Let me look.", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: '{"a":' } }] }, "length"),
      request({ input: "x" }),
    );
    expect(cutCall.output.map((item) => item.status)).toEqual(["completed", "incomplete"]);
  });

  it("fails when the engine aborted the answer", () => {
    const r = chatCompletionToResponse(completion("chatcmpl-ab", { content: "Half" }, "abort"), request({ input: "x" }));
    expect(r.status).toBe("failed");
    expect(r.error).toEqual({ code: "server_error", message: "The engine aborted the response." });
    expect(r.output[0]?.status).toBe("incomplete");
  });

  it("is what the openai SDK reads from a non-streaming call", async () => {
    const answer = chatCompletionToResponse(completion("chatcmpl-sdk", { content: "Hi!" }, "stop", usage(3, 2, 1)), request({ input: "x" }));
    const client = sdkClient(() => Response.json(answer));
    const got = await client.responses.create({ model: "m", input: "x" });
    expect(got.id).toBe("resp_sdk");
    expect(got.output_text).toBe("Hi!");
    expect(got.usage?.input_tokens_details.cached_tokens).toBe(1);
  });
});

// ---------------------------------------------------------------- conversation chain

describe("previous_response_id chain", () => {
  it("replays an earlier response's input and output before the new input, with only the new instructions", () => {
    const first = request({ instructions: "Old rules.", input: "Weather in Paris?", tools: [weatherTool] });
    const firstAnswer = chatCompletionToResponse(
      completion("chatcmpl-r1", { content: null, tool_calls: [{ id: "call_p", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] }, "tool_calls"),
      first,
    );
    const afterFirst = conversationItemsOf(first, firstAnswer);
    // Stored items are input items: a store can keep them as JSON and parse them back.
    expect(z.array(InputItem).parse(JSON.parse(JSON.stringify(afterFirst)))).toEqual(afterFirst);

    const second = request({
      previous_response_id: firstAnswer.id,
      instructions: "New rules.",
      input: [{ type: "function_call_output", call_id: "call_p", output: "sunny, 24°C" }],
      tools: [weatherTool],
    });
    const secondChat = responsesToChatRequest(second, afterFirst);
    expect(secondChat.messages).toEqual([
      { role: "system", content: "New rules." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_p", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_p", content: "sunny, 24°C" },
    ]);

    const secondAnswer = chatCompletionToResponse(completion("chatcmpl-r2", { content: "Sunny, 24°C." }, "stop"), second);
    expect(secondAnswer.previous_response_id).toBe("resp_r1");
    const afterSecond = conversationItemsOf(second, secondAnswer, afterFirst);
    const third = responsesToChatRequest(request({ previous_response_id: secondAnswer.id, input: "Thanks!" }), afterSecond);
    expect(third.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user"]);
    expect(third.messages[3]).toEqual({ role: "assistant", content: "Sunny, 24°C." });
  });
});

// ---------------------------------------------------------------- stream

const textThenToolCall = [
  chunk({ role: "assistant", content: "" }),
  chunk({ content: "Let me " }),
  chunk({ content: "check." }),
  chunk({ tool_calls: [{ index: 0, id: "call_w", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
  chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
  chunk({}, "tool_calls"),
  chunk(undefined, null, usage(40, 12, 32)),
];

describe("chat stream → Responses events", () => {
  const streamRequest = request({ input: "Weather in Paris?", tools: [weatherTool], stream: true });

  it("streams text, then a tool call, in OpenAI's event order with sequence numbers from 0", () => {
    const stream = new ChatToResponsesStream(streamRequest);
    const events = run(stream, textThenToolCall, false);
    // The events are the SDK's own event types (checked by tsc).
    const typed: OpenAI.Responses.ResponseStreamEvent[] = events;
    expect(typed).toHaveLength(15);
    expect(types(events)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(stream.ended).toBe(true);
    expect(stream.finish()).toEqual([]);

    expect(events[2]).toEqual({
      type: "response.output_item.added",
      sequence_number: 2,
      output_index: 0,
      item: { id: "msg_s1", type: "message", role: "assistant", status: "in_progress", content: [] },
    });
    expect(events[9]).toMatchObject({ output_index: 1, item: { id: "fc_s1_0", type: "function_call", call_id: "call_w", name: "get_weather", arguments: "", status: "in_progress" } });
    expect(events[12]).toMatchObject({ item_id: "fc_s1_0", output_index: 1, name: "get_weather", arguments: '{"city":"Paris"}' });

    const last = events.at(-1);
    if (last?.type !== "response.completed") throw new Error("expected response.completed");
    expect(last.response.usage).toEqual({
      input_tokens: 40,
      input_tokens_details: { cached_tokens: 32, cache_write_tokens: 0 },
      output_tokens: 12,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 52,
    });
    expect(stream.response).toEqual(last.response);

    // Every event is valid by the schema, and the stream ends as the whole answer would.
    for (const event of events) expect(ResponseStreamEventSchema.safeParse(event).success).toBe(true);
    const whole = ChatCompletion.parse({
      id: "chatcmpl-s1",
      object: "chat.completion",
      created: 1700000001,
      model: "m",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: "Let me check.", tool_calls: [{ id: "call_w", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
          finish_reason: "tool_calls",
        },
      ],
      usage: usage(40, 12, 32),
    });
    expect(last.response).toEqual(chatCompletionToResponse(whole, streamRequest));
  });

  it("rebuilds, through the SDK's own accumulator, the response it ends with", () => {
    const events = run(new ChatToResponsesStream(streamRequest), textThenToolCall);
    const final = events.at(-1);
    if (final?.type !== "response.completed") throw new Error("expected response.completed");
    let snapshot: OpenAI.Responses.Response | undefined;
    for (const event of events.slice(0, -1)) snapshot = accumulateResponse(event, snapshot);
    expect(snapshot?.output).toEqual(final.response.output);
    expect(snapshot?.output_text).toBe("Let me check.");
  });

  it("is what the openai SDK reads from a streaming call", async () => {
    const stream = new ChatToResponsesStream(streamRequest);
    const body = run(stream, textThenToolCall).map(formatResponsesEvent).join("");
    const client = sdkClient(() => new Response(body, { headers: { "content-type": "text/event-stream" } }));
    const seen: string[] = [];
    const sdkStream = client.responses.stream({ model: "m", input: "Weather in Paris?", tools: [weatherTool] });
    sdkStream.on("response.output_text.delta", (e) => seen.push(e.delta));
    const final = await sdkStream.finalResponse();
    expect(seen).toEqual(["Let me ", "check."]);
    expect(final.output_text).toBe("Let me check.");
    // The SDK adds its own parsed fields (parsed, parsed_arguments) to what it read.
    expect(final.output).toMatchObject(stream.response?.output ?? []);
    expect(final.output[1]).toMatchObject({ type: "function_call", parsed_arguments: { city: "Paris" } });
    expect(final.usage?.total_tokens).toBe(52);
  });

  it("formats an event as `event: <type>` and a JSON data line", () => {
    const [created] = new ChatToResponsesStream(streamRequest).push(textThenToolCall[0]);
    if (!created) throw new Error("expected an event");
    const text = formatResponsesEvent(created);
    expect(text.startsWith("event: response.created\ndata: {")).toBe(true);
    expect(text.endsWith("}\n\n")).toBe(true);
    expect(JSON.parse(eventData(text.trimEnd()) ?? "")).toEqual(created);
  });

  it("ends without usage at finish() when the engine sent none", () => {
    const stream = new ChatToResponsesStream(request({ input: "x" }));
    const before = run(stream, [chunk({ content: "Hi" }), chunk({}, "stop")], false);
    expect(types(before).at(-1)).toBe("response.output_item.done");
    const after = stream.finish();
    expect(types(after)).toEqual(["response.completed"]);
    const [completed] = after;
    if (completed?.type !== "response.completed") throw new Error("expected response.completed");
    expect(completed.response.usage).toBeUndefined();
    expect(completed.response.output_text).toBe("Hi");
    expect(completed.sequence_number).toBe(before.length);
  });

  it("is incomplete when the engine hit the length limit", () => {
    const events = run(new ChatToResponsesStream(request({ input: "x", max_output_tokens: 2 })), [
      chunk({ content: "Once upon" }),
      chunk({}, "length"),
      chunk(undefined, null, usage(3, 2, 0)),
    ]);
    const last = events.at(-1);
    if (last?.type !== "response.incomplete") throw new Error(`expected response.incomplete, got ${last?.type}`);
    expect(last.response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(last.response.output[0]?.status).toBe("incomplete");
    const done = events.find((e) => e.type === "response.output_item.done");
    expect(done?.type === "response.output_item.done" && done.item.status).toBe("incomplete");
  });

  it("makes no message of whitespace before a tool call, and streams several calls", () => {
    const events = run(new ChatToResponsesStream(request({ input: "x" })), [
      chunk({ content: "\n\n" }),
      chunk({ tool_calls: [{ index: 0, id: "call_a", function: { name: "f", arguments: '{"n":1}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: "call_b", function: { name: "g", arguments: "{}" } }] }),
      chunk({}, "tool_calls"),
      chunk(undefined, null, usage(1, 1, 0)),
    ]);
    expect(types(events).filter((t) => t.includes("output_text") || t.includes("content_part"))).toEqual([]);
    const last = events.at(-1);
    if (last?.type !== "response.completed") throw new Error("expected response.completed");
    expect(last.response.output.map((item) => item.id)).toEqual(["fc_s1_0", "fc_s1_1"]);
    expect(last.response.output.map((item) => item.type === "function_call" && item.arguments)).toEqual(['{"n":1}', "{}"]);
  });

  it("answers with an empty message when the engine said nothing", () => {
    const events = run(new ChatToResponsesStream(request({ input: "x" })), [chunk({ content: "" }), chunk({}, "stop")]);
    const last = events.at(-1);
    if (last?.type !== "response.completed") throw new Error("expected response.completed");
    expect(last.response.output).toEqual([
      { id: "msg_s1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "", annotations: [] }] },
    ]);
  });

  it("fails the response when the stream breaks, and sends an error event when nothing came", () => {
    const cut = run(new ChatToResponsesStream(request({ input: "x" })), [chunk({ content: "Par" })]);
    const failed = cut.at(-1);
    if (failed?.type !== "response.failed") throw new Error("expected response.failed");
    expect(failed.response.error?.code).toBe("server_error");
    expect(failed.response.output[0]).toMatchObject({ status: "incomplete", content: [{ text: "Par" }] });

    const timedOut = new ChatToResponsesStream(request({ input: "x" }));
    const events = run(timedOut, [chunk({ content: "Par" }), openAIErrorBody(504, "The call ran past its time limit.", { code: "call_timeout" })]);
    expect(types(events).slice(-4)).toEqual(["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed"]);
    expect(timedOut.response?.error).toEqual({ code: "server_error", message: "The call ran past its time limit." });

    const empty = new ChatToResponsesStream(request({ input: "x" })).finish();
    expect(empty).toEqual([{ type: "error", sequence_number: 0, code: "server_error", message: "The engine's stream ended before the response finished.", param: null }]);
  });

  it("leaves conversation items a later request can continue from", () => {
    const stream = new ChatToResponsesStream(streamRequest);
    run(stream, textThenToolCall);
    const response = stream.response;
    if (!response) throw new Error("expected a response");
    const items = conversationItemsOf(streamRequest, response);
    const next = responsesToChatRequest(request({ previous_response_id: response.id, input: [{ type: "function_call_output", call_id: "call_w", output: "sunny" }] }), items);
    expect(next.messages).toEqual([
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "Let me check.", tool_calls: [{ id: "call_w", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
      { role: "tool", tool_call_id: "call_w", content: "sunny" },
    ]);
  });
});
