import { cutEvents, eventStartAt, unfinishedEvent } from "../protocol/sse.js";

/*
 * An engine's event stream as the pool relays it (relay-event-stream.ts): latin1 text,
 * one character per byte, so the bytes go out exactly as they came, with no UTF-8
 * decode and encode of every token, and the ASCII markers the relay looks for
 * ("[DONE]", `"usage"`) are found by plain string search over a chunk's events at once.
 * Only an event that is parsed is read as UTF-8 (utf8Of); text the pool writes into the
 * stream joins it as its UTF-8 bytes (latin1Of).
 */

/** Cuts a stream's bytes into runs of whole events: each chunk's complete events, as latin1 text with their blank lines. */
export class EventTextCutter {
  #carry = "";

  /** The complete events this chunk finishes, with their blank lines ("" when none); the unfinished rest waits for the next chunk. */
  push(chunk: Buffer): string {
    const text = this.#carry === "" ? chunk.toString("latin1") : this.#carry + chunk.toString("latin1");
    const end = eventStartAt(text, text.length);
    this.#carry = end === text.length ? "" : text.slice(end);
    return end === text.length ? text : text.slice(0, end);
  }

  /** At the stream's end: a last event left without its blank line, given one; undefined when only blank text is left. */
  end(): string | undefined {
    const rest = this.#carry;
    this.#carry = "";
    const last = unfinishedEvent(rest);
    return last === undefined ? undefined : `${last}\n\n`;
  }
}

const NON_ASCII = /[^\x00-\x7f]/;

/** The UTF-8 reading of latin1 text (bytes as characters): what JSON.parse must see. */
export function utf8Of(latin1: string): string {
  return NON_ASCII.test(latin1) ? Buffer.from(latin1, "latin1").toString("utf8") : latin1;
}

/** Text the pool writes into a relayed stream (its stats comment, an error event) in the stream's form: its UTF-8 bytes as characters. */
export function latin1Of(text: string): string {
  return NON_ASCII.test(text) ? Buffer.from(text, "utf8").toString("latin1") : text;
}

/** The events of a run of whole events (EventTextCutter's), without their blank lines. */
export function eventsIn(text: string): string[] {
  const events: string[] = [];
  const rest = cutEvents(text, events);
  const last = unfinishedEvent(text.slice(rest));
  if (last !== undefined) events.push(last);
  return events;
}
