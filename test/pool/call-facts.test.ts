import { describe, expect, it } from "vitest";
import { dataEvent, DONE_EVENT } from "../../src/protocol/sse.js";
import { answerFactsReader, factsFromCompletion, factsFromJsonBytes, StreamFactsCollector } from "../../src/pool/call-facts.js";

const usage = { prompt_tokens: 900, completion_tokens: 40, total_tokens: 940, prompt_tokens_details: { cached_tokens: 512 } };

/** An SSE event as the splitter hands it over: without its blank line. */
const event = (payload: unknown) => dataEvent(payload).trimEnd();
/** Events as the relay passes them on: a run of whole events with their blank lines, latin1 (their UTF-8 bytes as characters). */
const asRelayed = (...events: string[]) => Buffer.from(events.map((e) => `${e}\n\n`).join(""), "utf8").toString("latin1");

const chunk = (delta: object, extra: object = {}) => ({
  id: "c",
  object: "chat.completion.chunk",
  created: 1,
  model: "m",
  choices: [{ index: 0, delta, finish_reason: null }],
  ...extra,
});

describe("facts of a whole completion", () => {
  it("reads usage with cached tokens and every tool call", () => {
    const body = {
      id: "c",
      object: "chat.completion",
      created: 1,
      model: "m",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "bash", arguments: '{"command":"sleep 3"}' } },
              { id: "call_b", type: "function", function: { name: "web", arguments: "{}" } },
            ],
          },
        },
      ],
      usage,
    };
    expect(factsFromCompletion(body)).toEqual({
      usage: { promptTokens: 900, completionTokens: 40, cachedTokens: 512 },
      toolCalls: [
        { tool: "bash", toolCallId: "call_a", args: '{"command":"sleep 3"}' },
        { tool: "web", toolCallId: "call_b", args: "{}" },
      ],
    });
  });

  it("defaults cached tokens to 0 and tolerates what is not a completion", () => {
    expect(factsFromCompletion({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })).toEqual({
      usage: { promptTokens: 3, completionTokens: 1, cachedTokens: 0 },
    });
    expect(factsFromCompletion({ usage: { prompt_tokens: -1 } })).toEqual({});
    expect(factsFromCompletion([1, 2])).toEqual({});
    expect(factsFromJsonBytes(new TextEncoder().encode("{not json").buffer as ArrayBuffer)).toEqual({});
  });
});

describe("facts of a stream", () => {
  it("reads the usage chunk and joins tool-call argument fragments", () => {
    const collector = new StreamFactsCollector();
    const events = [
      event(chunk({ role: "assistant", content: "" }, { usage: null })),
      event(chunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "bash", arguments: '{"comm' } }] })),
      event(chunk({ tool_calls: [{ index: 1, id: "call_b", type: "function", function: { name: "web", arguments: "" } }] })),
      event(chunk({ tool_calls: [{ index: 0, function: { arguments: 'and":"sleep 2"}' } }] })),
      event({ ...chunk({}), choices: [], usage }),
      DONE_EVENT,
    ];
    for (const e of events) collector.observeEvents(asRelayed(e));
    expect(collector.facts()).toEqual({
      usage: { promptTokens: 900, completionTokens: 40, cachedTokens: 512 },
      toolCalls: [
        { tool: "bash", toolCallId: "call_a", args: '{"command":"sleep 2"}' },
        { tool: "web", toolCallId: "call_b", args: "" },
      ],
    });
  });

  it.each([
    ["the collector", () => new StreamFactsCollector()],
    // The relay's reader parses once per event read: a read between events must still see the newest.
    ["the relay's reader", () => answerFactsReader("chat").stream()],
  ])("keeps the latest usage: per-chunk usage of a stream cut short, then the final usage chunk (%s)", (_name, collect) => {
    const collector = collect();
    const soFar = (completion: number) => ({ prompt_tokens: 900, completion_tokens: completion, total_tokens: 900 + completion });
    collector.observeEvents(asRelayed(event(chunk({ role: "assistant", content: "" }, { usage: soFar(0) }))));
    expect(collector.facts()).toEqual({ usage: { promptTokens: 900, completionTokens: 0, cachedTokens: 0 } });
    for (let i = 1; i <= 3; i++) collector.observeEvents(asRelayed(event(chunk({ content: `t${i}` }, { usage: soFar(i) }))));
    // Cut here (client gone): the engine's count up to the last chunk read.
    expect(collector.facts()).toEqual({ usage: { promptTokens: 900, completionTokens: 3, cachedTokens: 0 } });
    collector.observeEvents(asRelayed(event(chunk({ content: "t4" }, { usage: null }))));
    collector.observeEvents(asRelayed(event({ ...chunk({}), choices: [], usage: { ...soFar(40), prompt_tokens_details: { cached_tokens: 512 } } })));
    expect(collector.facts()).toEqual({ usage: { promptTokens: 900, completionTokens: 40, cachedTokens: 512 } });
  });

  it("reads a run of events at once as one event after another: the last usage object, every tool call, arguments in UTF-8", () => {
    const collector = new StreamFactsCollector();
    const soFar = (completion: number) => ({ prompt_tokens: 900, completion_tokens: completion, total_tokens: 900 + completion });
    collector.observeEvents(
      asRelayed(
        event(chunk({ role: "assistant", content: "" }, { usage: soFar(0) })),
        event(chunk({ tool_calls: [{ index: 0, id: "call_é", type: "function", function: { name: "write", arguments: '{"text":"naïve ' } }] }, { usage: soFar(1) })),
        event(chunk({ content: "" }, { usage: null })),
      ),
    );
    expect(collector.facts().usage).toEqual({ promptTokens: 900, completionTokens: 1, cachedTokens: 0 });
    // CRLF boundaries; the argument's 🙂 arrives as four bytes.
    const crlf = asRelayed(event(chunk({ tool_calls: [{ index: 0, function: { arguments: '🙂"}' } }] }, { usage: soFar(2) }))).replaceAll("\n", "\r\n");
    collector.observeEvents(crlf + asRelayed(event(chunk({ content: "the usage" }, { usage: null })), DONE_EVENT));
    expect(collector.facts()).toEqual({
      usage: { promptTokens: 900, completionTokens: 2, cachedTokens: 0 },
      toolCalls: [{ tool: "write", toolCallId: "call_é", args: '{"text":"naïve 🙂"}' }],
    });
  });

  it("ignores content chunks, comments and broken JSON", () => {
    const collector = new StreamFactsCollector();
    collector.observeEvents(asRelayed(event(chunk({ content: "the word usage and tool_calls in text" }))));
    collector.observeEvents(asRelayed(": agentix {}"));
    collector.observeEvents(asRelayed('data: {"usage": {"prompt_tokens": 1'));
    expect(collector.facts()).toEqual({});
  });
});

describe("facts of answers in the Messages and Responses shapes (engines serving them natively)", () => {
  const typed = (payload: { type: string } & Record<string, unknown>) => `event: ${payload.type}\n${event(payload)}`;

  it("Messages: the prompt is input + cache reads + cache writes, tool_use blocks are tool calls", () => {
    const body = {
      type: "message",
      content: [{ type: "thinking", thinking: "…" }, { type: "tool_use", id: "toolu_1", name: "bash", input: { command: "ls" } }],
      usage: { input_tokens: 10, output_tokens: 7, cache_read_input_tokens: 80, cache_creation_input_tokens: 5 },
    };
    expect(answerFactsReader("messages").fromJsonBytes(new TextEncoder().encode(JSON.stringify(body)).buffer as ArrayBuffer)).toEqual({
      usage: { promptTokens: 95, completionTokens: 7, cachedTokens: 80 },
      toolCalls: [{ tool: "bash", toolCallId: "toolu_1", args: '{"command":"ls"}' }],
    });
  });

  it("Messages stream: usage from message_start and message_delta; a stream cut short counts its deltas as output", () => {
    const start = typed({ type: "message_start", message: { usage: { input_tokens: 40, output_tokens: 0, cache_read_input_tokens: 60 } } });
    const deltas = [
      typed({ type: "content_block_start", index: 0, content_block: { type: "tool_use", id: "toolu_2", name: "grep", input: {} } }),
      typed({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: '{"pattern":' } }),
      typed({ type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: '"x"}' } }),
    ];
    const cut = answerFactsReader("messages").stream();
    for (const e of [start, ...deltas]) cut.observeEvents(asRelayed(e));
    expect(cut.facts()).toEqual({
      usage: { promptTokens: 100, completionTokens: 2, cachedTokens: 60 },
      toolCalls: [{ tool: "grep", toolCallId: "toolu_2", args: '{"pattern":"x"}' }],
    });
    const whole = answerFactsReader("messages").stream();
    for (const e of [start, ...deltas, typed({ type: "message_delta", delta: {}, usage: { output_tokens: 9 } })]) whole.observeEvents(asRelayed(e));
    expect(whole.facts().usage).toEqual({ promptTokens: 100, completionTokens: 9, cachedTokens: 60 });
  });

  it("Responses: usage with cached tokens inside input_tokens, function_call items; a stream cut before completion reports no usage", () => {
    const response = {
      object: "response",
      output: [{ type: "reasoning" }, { type: "function_call", call_id: "call_9", name: "bash", arguments: "{}" }],
      usage: { input_tokens: 50, input_tokens_details: { cached_tokens: 30 }, output_tokens: 3 },
    };
    const expected = { usage: { promptTokens: 50, completionTokens: 3, cachedTokens: 30 }, toolCalls: [{ tool: "bash", toolCallId: "call_9", args: "{}" }] };
    expect(answerFactsReader("responses").fromJsonBytes(new TextEncoder().encode(JSON.stringify(response)).buffer as ArrayBuffer)).toEqual(expected);
    const stream = answerFactsReader("responses").stream();
    stream.observeEvents(asRelayed(typed({ type: "response.created", response: { ...response, usage: null } })));
    stream.observeEvents(asRelayed(typed({ type: "response.output_item.done", item: response.output[1] })));
    expect(stream.facts()).toEqual({ toolCalls: expected.toolCalls });
    stream.observeEvents(asRelayed(typed({ type: "response.completed", response })));
    expect(stream.facts()).toEqual(expected);
  });
});
