import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EVENT_BOUNDARY, eventData, isDoneEvent, SseEventCutter, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsCommentEvent } from "../../src/protocol/stats.js";
import { piecesAt, sseTexts } from "./sse-texts.js";

async function split(pieces: string[]): Promise<string[]> {
  const encoder = new TextEncoder();
  const source = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
  const events: string[] = [];
  for await (const event of source.pipeThrough(new SseEventSplitter())) events.push(event);
  return events;
}

describe("SSE splitting", () => {
  it("reassembles events cut at arbitrary byte positions", async () => {
    const text = 'data: {"a":1}\n\n: comment\n\ndata: [DONE]\n\n';
    for (let cut = 1; cut < text.length; cut++) {
      expect(await split([text.slice(0, cut), text.slice(cut)])).toEqual(['data: {"a":1}', ": comment", "data: [DONE]"]);
    }
  });

  it("handles CRLF boundaries and a final event without blank line", async () => {
    expect(await split(["data: x\r\n\r\ndata: [DONE]"])).toEqual(["data: x", "data: [DONE]"]);
  });

  it("cuts synchronously (the pool's relay) exactly as the stream splitter does, a multi-byte character cut included", () => {
    const bytes = new TextEncoder().encode('data: {"t":"héllo"}\r\n\r\n: agentix {}\n\ndata: [DONE]');
    for (let cut = 1; cut < bytes.length; cut++) {
      const cutter = new SseEventCutter();
      const events = [...cutter.push(bytes.slice(0, cut)), ...cutter.push(bytes.slice(cut))];
      const last = cutter.end();
      expect([...events, ...(last === undefined ? [] : [last])]).toEqual(['data: {"t":"héllo"}', ": agentix {}", "data: [DONE]"]);
      expect(cutter.end()).toBeUndefined();
    }
  });

  it("reads data and [DONE]", () => {
    expect(eventData('data: {"a":1}')).toBe('{"a":1}');
    // One data line (the fast path) reads as the general rule does: one leading space dropped, no more.
    expect(eventData("data:x")).toBe("x");
    expect(eventData("data:  x")).toBe(" x");
    expect(eventData("data:")).toBe("");
    expect(eventData("data: a\ndata: b")).toBe("a\nb");
    expect(eventData(": only a comment")).toBeUndefined();
    expect(isDoneEvent("data: [DONE]")).toBe(true);
    expect(isDoneEvent('data: {"a":1}')).toBe(false);
    // Its text inside another event's data is not the end.
    expect(isDoneEvent('data: {"content":"[DONE]"}')).toBe(false);
    expect(isDoneEvent(": [DONE]")).toBe(false);
    expect(isDoneEvent("event: end\ndata: [DONE]")).toBe(true);
  });

  it("round-trips the pool's stats comment and ignores other comments", async () => {
    const stats = { engine: "e2", queueMs: 12, serviceMs: 345.5 };
    const [event] = await split([statsCommentEvent(stats)]);
    expect(parseStatsEvent(event ?? "")).toEqual(stats);
    expect(parseStatsEvent(": keep-alive")).toBeUndefined();
    expect(parseStatsEvent(': agentix {"engine":1}')).toBeUndefined();
  });
});

/** The cutting rule as a regex over the whole buffer (what SseEventCutter did before its scan): the reference. */
class RegexCutter {
  readonly #decoder = new TextDecoder();
  #buffer = "";

  push(chunk: Uint8Array): string[] {
    this.#buffer += this.#decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    let match: RegExpExecArray | null;
    while ((match = EVENT_BOUNDARY.exec(this.#buffer)) !== null) {
      const event = this.#buffer.slice(0, match.index);
      this.#buffer = this.#buffer.slice(match.index + match[0].length);
      if (event.length > 0) events.push(event);
    }
    return events;
  }

  end(): string | undefined {
    const rest = this.#buffer + this.#decoder.decode();
    this.#buffer = "";
    return rest.trim().length > 0 ? rest.replace(/\r?\n$/, "") : undefined;
  }
}

describe("SseEventCutter's scan", () => {
  it("cuts every text, however it is chunked, exactly where EVENT_BOUNDARY's leftmost match does", () => {
    const cuts = fc.array(fc.nat(), { maxLength: 6 });
    fc.assert(
      fc.property(sseTexts, cuts, (input, at) => {
        const pieces = piecesAt(new TextEncoder().encode(input), at);
        const scan = new SseEventCutter();
        const reference = new RegexCutter();
        for (const piece of pieces) expect(scan.push(piece)).toEqual(reference.push(piece));
        expect(scan.end()).toEqual(reference.end());
      }),
      { numRuns: 20_000 },
    );
  });
});
