import { isJsonObject, type JsonObject } from "./json.js";

/*
 * Server-sent events as the engines write them: events separated by a blank line,
 * `data:` lines carrying JSON, `data: [DONE]` last, `:` lines as comments. Both the
 * pool (to add its stats comment) and the edge (to strip it and read usage) cut the
 * stream into whole events with this one splitter.
 */

const EVENT_BOUNDARY = /\r?\n\r?\n/;

/**
 * The splitting rule itself, synchronous: bytes in, the complete events they finish
 * out (without their blank line); `end()` gives a last event left without one. For a
 * caller that reads Node streams (the pool's relay) as for SseEventSplitter below.
 */
export class SseEventCutter {
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
