import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { cutEvents, eventAt, eventStartAt, SseEventCutter } from "../../src/protocol/sse.js";
import { EventTextCutter, eventsIn, latin1Of, utf8Of } from "../../src/pool/event-text.js";
import { piecesAt, sseTexts } from "../protocol/sse-texts.js";

/*
 * The relay's cut of an engine stream (event-text.ts): runs of whole events as latin1
 * text, which go out as the same bytes. Checked against the stream splitter's cut
 * (SseEventCutter) over texts dense in CR, LF and multi-byte characters, chunked anywhere.
 */

const latin1 = (bytes: Uint8Array) => Buffer.from(bytes).toString("latin1");
/**
 * Events' content, whatever line ends lead or close them: a lone line feed left at a
 * chunk's end, and the stream's unfinished last event, which both cuts close with the
 * same bytes ("\n\n" after it) but read at different line ends.
 */
const content = (events: readonly string[]) => events.map((event) => event.replace(/^[\r\n]+|[\r\n]+$/g, "")).filter((event) => event !== "");

describe("EventTextCutter", () => {
  it("passes every byte on in order, each run ending at a boundary, with the splitter's events, however the stream is chunked", () => {
    const cuts = fc.array(fc.nat(), { maxLength: 6 });
    fc.assert(
      fc.property(sseTexts, cuts, (input, at) => {
        const bytes = new TextEncoder().encode(input);
        const cutter = new EventTextCutter();
        const reference = new SseEventCutter();
        const runs: string[] = [];
        const expected: string[] = [];
        for (const piece of piecesAt(bytes, at)) {
          const run = cutter.push(Buffer.from(piece));
          // Whole events only: the run ends where its own last boundary does.
          expect(eventStartAt(run, run.length)).toBe(run.length);
          runs.push(run);
          expected.push(...reference.push(piece));
        }
        const whole = latin1(bytes);
        // The bytes gone out are the stream's own, in order; what waits holds no whole event (blank lines at most).
        const sent = runs.join("");
        expect(whole.startsWith(sent)).toBe(true);
        const waiting: string[] = [];
        cutEvents(whole.slice(sent.length), waiting);
        expect(content(waiting)).toEqual([]);
        const last = cutter.end();
        const referenceLast = reference.end();
        if (referenceLast !== undefined) expected.push(referenceLast);
        const events = eventsIn(runs.join("") + (last ?? "")).map(utf8Of);
        expect(content(events)).toEqual(content(expected));
        expect(cutter.end()).toBeUndefined();
      }),
      { numRuns: 20_000 },
    );
  });

  it("keeps a multi-byte character cut between chunks as its bytes, read back as UTF-8 only where parsed", () => {
    const bytes = Buffer.from('data: {"t":"café 😀"}\r\n\r\ndata: [DONE]\n\n', "utf8");
    const split = bytes.indexOf(Buffer.from("😀")) + 2;
    const cutter = new EventTextCutter();
    expect(cutter.push(bytes.subarray(0, split))).toBe("");
    const run = cutter.push(bytes.subarray(split));
    expect(Buffer.from(run, "latin1").equals(bytes)).toBe(true);
    expect(eventsIn(run).map(utf8Of)).toEqual(['data: {"t":"café 😀"}', "data: [DONE]"]);
  });

  it("ends a last event written without its blank line, and drops blank text", () => {
    const cutter = new EventTextCutter();
    expect(cutter.push(Buffer.from("data: a\n\ndata: b\n"))).toBe("data: a\n\n");
    expect(cutter.end()).toBe("data: b\n\n");
    cutter.push(Buffer.from("data: c\n\n\r\n"));
    expect(cutter.end()).toBeUndefined();
  });
});

describe("finding an event in a run", () => {
  const run = 'data: {"a":1}\n\n: comment\r\n\r\nevent: x\ndata: {"usage":{}}\n\ndata: [DONE]\n\n';

  it("the event holding a position, whatever its boundaries", () => {
    expect(eventAt(run, run.indexOf('"a"'))).toBe('data: {"a":1}');
    expect(eventAt(run, run.indexOf("comment"))).toBe(": comment");
    expect(eventAt(run, run.indexOf('"usage"'))).toBe('event: x\ndata: {"usage":{}}');
    expect(eventAt(run, run.indexOf("[DONE]"))).toBe("data: [DONE]");
    expect(eventStartAt(run, run.indexOf("[DONE]"))).toBe(run.indexOf("data: [DONE]"));
    expect(eventStartAt(run, run.length)).toBe(run.length);
    expect(eventStartAt(run, 3)).toBe(0);
    // No boundary after it: to the text's end.
    expect(eventAt("data: x", 2)).toBe("data: x");
  });

  it("reads and writes the pool's own text as UTF-8 bytes", () => {
    expect(latin1Of("ascii")).toBe("ascii");
    expect(Buffer.from(latin1Of("é 😀"), "latin1").toString("utf8")).toBe("é 😀");
    expect(utf8Of(latin1Of("é 😀"))).toBe("é 😀");
  });
});
