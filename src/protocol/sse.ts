import { isJsonObject, type JsonObject } from "./json.js";

/*
 * Server-sent events as the engines write them: events separated by a blank line,
 * `data:` lines carrying JSON, `data: [DONE]` last, `:` lines as comments. Both the
 * pool (to add its stats comment) and the edge (to strip it and read usage) cut the
 * stream into whole events with this one splitter.
 */

/** Events are separated by this (a blank line, CRLF or LF); SseEventCutter finds it without the regex. */
export const EVENT_BOUNDARY = /\r?\n\r?\n/;
const LF = 10;
const CR = 13;
const SPACE = 32;

/**
 * The splitting rule itself, synchronous: bytes in, the complete events they finish
 * out (without their blank line); `end()` gives a last event left without one.
 */
export class SseEventCutter {
  readonly #decoder = new TextDecoder();
  #buffer = "";

  push(chunk: Uint8Array): string[] {
    const buffer = this.#buffer + this.#decoder.decode(chunk, { stream: true });
    const events: string[] = [];
    const start = cutEvents(buffer, events);
    this.#buffer = start === 0 ? buffer : buffer.slice(start);
    return events;
  }

  end(): string | undefined {
    const rest = this.#buffer + this.#decoder.decode();
    this.#buffer = "";
    return unfinishedEvent(rest);
  }
}

/** The event a stream's text left without its blank line (its last line end dropped), or undefined when that text is blank. */
export function unfinishedEvent(rest: string): string | undefined {
  return rest.trim().length > 0 ? rest.replace(/\r?\n$/, "") : undefined;
}

/** Where the blank line that starts at the line feed `lf` ("\n\n" or "\n\r\n") ends, or -1 when none starts there. */
function boundaryEndAt(text: string, lf: number): number {
  const next = text.charCodeAt(lf + 1);
  if (next === LF) return lf + 2;
  if (next === CR && text.charCodeAt(lf + 2) === LF) return lf + 3;
  return -1;
}

/** Where the event that starts at `start` ends before the blank line at `lf` (a "\r" before that line feed is the boundary's). */
function eventEndBefore(text: string, start: number, lf: number): number {
  return lf > start && text.charCodeAt(lf - 1) === CR ? lf - 1 : lf;
}

/**
 * Appends the whole events of `text` to `events` (without their blank lines; empty ones
 * skipped) and returns where its unfinished rest starts. The boundary is
 * EVENT_BOUNDARY's leftmost match, found by scanning for line feeds: the first "\n"
 * followed by "\n" or "\r\n" ends an event (a "\r" before it is the boundary's too).
 * One pass and one slice per event; the regex was run again over the rest of the
 * buffer, re-sliced, at every event.
 */
export function cutEvents(text: string, events: string[]): number {
  let start = 0;
  let from = 0;
  for (;;) {
    const lf = text.indexOf("\n", from);
    if (lf === -1) break;
    const after = boundaryEndAt(text, lf);
    if (after === -1) {
      from = lf + 1;
      continue;
    }
    const end = eventEndBefore(text, start, lf);
    if (end > start) events.push(text.slice(start, end));
    start = after;
    from = after;
  }
  return start;
}

/**
 * Where the event holding position `at` of `text` starts: just past the last blank line
 * ("\n\n" or "\n\r\n", as cutEvents finds them) that ends at or before `at`; 0 when
 * none does. At `text.length`: where the text's unfinished rest starts. Found from the
 * line feeds back from `at`, so the search ends at the event's own start (a search for
 * "\n\r\n" in a stream without one ran to the text's start).
 */
export function eventStartAt(text: string, at: number): number {
  for (let lf = text.lastIndexOf("\n", at - 1); lf > 0; lf = text.lastIndexOf("\n", lf - 1)) {
    const before = text.charCodeAt(lf - 1);
    if (before === LF || (before === CR && lf >= 2 && text.charCodeAt(lf - 2) === LF)) return lf + 1;
  }
  return 0;
}

/** The event holding position `at` of `text`, without its boundary (to the text's end when none follows). */
export function eventAt(text: string, at: number): string {
  const start = eventStartAt(text, at);
  let end = text.length;
  for (let lf = text.indexOf("\n", at); lf !== -1; lf = text.indexOf("\n", lf + 1)) {
    if (boundaryEndAt(text, lf) !== -1) {
      end = eventEndBefore(text, start, lf);
      break;
    }
  }
  return text.slice(start, end);
}

/** Bytes in, one string per complete event out (without its blank line). */
export class SseEventSplitter extends TransformStream<Uint8Array, string> {
  constructor() {
    const cutter = new SseEventCutter();
    super({
      transform(chunk, controller) {
        for (const event of cutter.push(chunk)) controller.enqueue(event);
      },
      flush(controller) {
        const last = cutter.end();
        if (last !== undefined) controller.enqueue(last);
      },
    });
  }
}

/** The joined `data:` payload of an event, or undefined when it has none. */
export function eventData(event: string): string | undefined {
  // The usual event: one data line.
  if (event.startsWith("data:") && !event.includes("\n")) return event.charCodeAt(5) === SPACE ? event.slice(6) : event.slice(5);
  const lines = event.split(/\r?\n/).filter((line) => line.startsWith("data:"));
  if (lines.length === 0) return undefined;
  return lines.map((line) => line.slice(5).replace(/^ /, "")).join("\n");
}

/** An event's `data:` payload parsed as a JSON object; undefined when it has none or it is not one. */
export function eventObject(event: string): JsonObject | undefined {
  const data = eventData(event);
  if (data === undefined) return undefined;
  try {
    const parsed: unknown = JSON.parse(data);
    return isJsonObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Comment lines of an event (text after the leading colon). */
export function eventComments(event: string): string[] {
  return event
    .split(/\r?\n/)
    .filter((line) => line.startsWith(":"))
    .map((line) => line.slice(1).replace(/^ /, ""));
}

export const DONE_EVENT = "data: [DONE]";

export function isDoneEvent(event: string): boolean {
  // A text test first: the relays ask this of every event, and only the last one can be it.
  return event.includes("[DONE]") && eventData(event) === "[DONE]";
}

/** Serialises one event, with its terminating blank line. */
export function formatEvent(event: string): string {
  return `${event}\n\n`;
}

export function dataEvent(payload: unknown): string {
  return formatEvent(`data: ${JSON.stringify(payload)}`);
}
