import type { ServerResponse } from "node:http";
import { Header } from "../protocol/headers.js";
import { dataEvent, eventAt, eventObject, eventStartAt, isDoneEvent } from "../protocol/sse.js";
import { statsCommentEvent } from "../protocol/stats.js";
import { CALL_ERROR_MESSAGES, callErrorBody } from "./call-errors.js";
import { answerFactsReader, type CallFacts } from "./call-facts.js";
import { DirectAnswer, headerList } from "./direct-answer.js";
import type { EngineAnswerListener, EngineExchange } from "./engine-exchange.js";
import type { CallApi } from "./engine-request.js";
import { EventTextCutter, latin1Of, utf8Of } from "./event-text.js";
import { describe, type RelayAttempt, round } from "./relay-attempt.js";
import type { RelayRequest } from "./relay.js";

/*
 * An engine's event stream, relayed (relay.ts). The engine's body chunks come straight
 * from its exchange (engine-exchange.ts) and are cut at their last event boundary
 * synchronously as each arrives; each run of whole events is passed on as the engine
 * wrote it, as latin1 text (event-text.ts: bytes in, the same bytes out, no UTF-8
 * decode, re-framing and encode per token), with the stats comment put in before the
 * stream's last event. The runs completed within one event-loop turn go to the client
 * as one chunk (one socket write, where there was one per event). What the events say
 * (usage, tool calls) is read once they have gone out (#unobserved). Nothing is read
 * until a sink is attached: the pool's server writes to the Node response
 * (direct-answer.ts); anything else (a translation of the answer, Hono's app.request()
 * in tests) reads the Response's web stream, made only then, which attaches at its
 * first read. A class whose listeners are set in its constructor: see relay-attempt.ts.
 */

const NATIVE_FINAL_EVENTS: Partial<Record<CallApi, ReadonlySet<string>>> = {
  messages: new Set(["message_stop"]),
  responses: new Set(["response.completed", "response.incomplete", "response.failed"]),
};

/** Where the first event of a run that is one `is` accepts starts, looking only at events holding `marker`; -1 when none. */
function eventStartWhere(text: string, marker: string, is: (event: string) => boolean): number {
  for (let at = text.indexOf(marker); at !== -1; at = text.indexOf(marker, at + marker.length)) {
    if (is(eventAt(text, at))) return eventStartAt(text, at);
  }
  return -1;
}

/**
 * Where the stream's last event starts in this run of whole events, or -1: `data:
 * [DONE]`, or a Messages or Responses stream's final event (they end without it). A
 * text search first: only an event naming one of them is looked at (engines need not
 * write an `event:` line).
 */
function lastEventStart(api: CallApi, text: string): number {
  let first = eventStartWhere(text, "[DONE]", isDoneEvent);
  for (const type of NATIVE_FINAL_EVENTS[api] ?? []) {
    const at = eventStartWhere(text, `"${type}"`, (event) => eventObject(utf8Of(event))?.type === type);
    if (at !== -1 && (first === -1 || at < first)) first = at;
  }
  return first;
}

/** Chunks the relay's stream may hold before it pauses the engine's body (backpressure from the client's socket, or no reader yet). */
const STREAM_HIGH_WATER_CHUNKS = 16;

/** Where a relayed stream's text (latin1: its bytes) goes: the Node response itself, or the web stream a Response carries. */
interface RelaySink {
  /** False: the client's side is full; the engine's body pauses until the sink asks for more (drain, or the web stream's next pull). */
  write(text: string): boolean;
  close(text: string): void;
}

/** A relayed event stream's answer (headers known at its start; events as they come): the exchange's listener from now. */
export function relayEventStream(exchange: EngineExchange, req: RelayRequest, attempt: RelayAttempt): DirectAnswer {
  const relay = new EventStreamRelay(exchange, req, attempt);
  exchange.listener = relay;
  return relay.answer;
}

class EventStreamRelay implements EngineAnswerListener {
  readonly answer: DirectAnswer;
  readonly #headers: Record<string, string>;
  readonly #body: EngineExchange;
  readonly #req: RelayRequest;
  readonly #attempt: RelayAttempt;
  readonly #cutter = new EventTextCutter();
  readonly #facts: ReturnType<ReturnType<typeof answerFactsReader>["stream"]>;
  #lastByteMs: number | undefined;
  #statsWritten = false;
  #finished = false;
  #sink: RelaySink | undefined;
  /*
   * Events that arrive within one turn of the event loop leave together: an engine
   * writes each token as its own chunk, and one socket write per chunk was the largest
   * single cost of a stream (writev). The wait is one turn (setImmediate), not a timer.
   */
  #pending = "";
  #flushScheduled = false;
  /**
   * Runs of events passed on whose facts are not read yet: read right after their
   * write (#flushPending), or sooner when the facts are needed (the stats, the
   * attempt's end). Held no longer: kept to the stream's end, every stream's whole
   * text would be live at once, a thousand streams' worth.
   */
  readonly #unobserved: string[] = [];
  #webAttached = false;
  /** What came before a sink was attached: the body's chunks, and whether it ended. */
  #early: Buffer[] | undefined = [];
  #endedEarly = false;
  /** The last text of a stream that failed before a sink was attached: the sink gets it, and is closed, when it comes. */
  #unsentClose: string | undefined;
  readonly #flush: () => void;

  constructor(body: EngineExchange, req: RelayRequest, attempt: RelayAttempt) {
    this.#body = body;
    this.#req = req;
    this.#attempt = attempt;
    this.#facts = answerFactsReader(req.api).stream();
    this.#flush = () => this.#flushPending();

    this.#headers = {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // Known from the start, so a stream cut before its stats comment still says where it ran.
      [Header.engine]: req.statsEngineId ?? req.engine.id,
      [Header.queueMs]: String(round(req.queueMs)),
    };
    this.answer = new DirectAnswer(
      () => this.#webResponse(),
      (outgoing, extraHeaders) => this.#writeTo(outgoing, extraHeaders),
    );
  }

  /** Its Response: the events through a web stream, which attaches to the engine's body at its first read. */
  #webResponse(): Response {
    const relay = this;
    const body = this.#body;
    const stream = new ReadableStream<Uint8Array>(
      {
        // highWaterMark 0: pull() runs only at a read, so building the Response reads nothing.
        pull(controller) {
          if (relay.#webAttached) {
            body.resume();
            return;
          }
          relay.#webAttached = true;
          relay.#attach({
            write(text) {
              controller.enqueue(Buffer.from(text, "latin1"));
              return (controller.desiredSize ?? 0) > -STREAM_HIGH_WATER_CHUNKS;
            },
            close(text) {
              if (text !== "") controller.enqueue(Buffer.from(text, "latin1"));
              controller.close();
            },
          });
        },
        cancel() {
          relay.#clientGone();
        },
      },
      { highWaterMark: 0 },
    );
    return new Response(stream, { status: 200, headers: this.#headers });
  }

  /** Straight to Node's response: the headers with the first events, each turn's events in one write. */
  #writeTo(outgoing: ServerResponse, extraHeaders: Readonly<Record<string, string>>): void {
    const body = this.#body;
    outgoing.writeHead(200, headerList(this.#headers, extraHeaders));
    outgoing.on("close", () => {
      if (!outgoing.writableFinished) this.#clientGone();
    });
    outgoing.on("drain", () => body.resume());
    // The headers go with the first events when they come within this turn, else alone at once (a long prefill).
    setImmediate(() => {
      if (!outgoing.headersSent && !outgoing.destroyed && this.#pending === "" && !this.#finished) outgoing.flushHeaders();
    });
    this.#attach({
      write(text) {
        return outgoing.destroyed || outgoing.write(text, "latin1");
      },
      close(text) {
        if (outgoing.destroyed) return;
        if (text === "") outgoing.end();
        else outgoing.end(text, "latin1");
      },
    });
  }

  #attach(sink: RelaySink): void {
    this.#sink = sink;
    if (this.#unsentClose !== undefined) return this.#closeSink(this.#unsentClose);
    const early = this.#early ?? [];
    this.#early = undefined;
    for (const chunk of early) this.#data(chunk);
    if (this.#endedEarly) this.#end();
    else if (early.length >= STREAM_HIGH_WATER_CHUNKS) this.#body.resume();
  }

  // The exchange's listener (engine-exchange.ts): its chunks wait for a sink, its end too; an error ends the relay at once.
  start(): void {
    // The stream's status and headers were read by the relay before it was handed over.
  }

  data(chunk: Buffer): void {
    if (this.#finished) return;
    const early = this.#early;
    if (early === undefined) return this.#data(chunk);
    early.push(chunk);
    // Nobody reads yet (a Response not read at once): hold the engine's body.
    if (early.length === STREAM_HIGH_WATER_CHUNKS) this.#body.pause();
  }

  end(): void {
    if (this.#early !== undefined) this.#endedEarly = true;
    else this.#end();
  }

  error(error: Error): void {
    this.#error(error);
  }

  #statsText(): string {
    this.#lastByteMs ??= this.#req.clock.now() - this.#req.dispatchedAt;
    if (this.#statsWritten) return "";
    this.#statsWritten = true;
    const attempt = this.#attempt;
    // The usage (a JSON parse and a zod check of the last usage event) only where the charge reads it; else it is read at the attempt's end, after the write.
    const facts = this.#req.serviceReadsFacts === false ? undefined : this.#factsNow();
    return latin1Of(statsCommentEvent(attempt.stats(attempt.charge(this.#lastByteMs, facts))));
  }

  /** What the events passed on so far say. */
  #factsNow(): CallFacts {
    this.#observePassed();
    return this.#facts.facts();
  }

  #observePassed(): void {
    const runs = this.#unobserved;
    for (const text of runs) this.#facts.observeEvents(text);
    runs.length = 0;
  }

  /** A run of whole events as relayed (its facts read after its write: #unobserved), the stats comment before the stream's last event. */
  #relayed(text: string): string {
    if (text === "") return text;
    this.#unobserved.push(text);
    if (this.#statsWritten) return text;
    // Before the stream's last event, read by then, so a client that hangs up once it has the end still leaves the edge the stats.
    const last = lastEventStart(this.#req.api, text);
    return last === -1 ? text : text.slice(0, last) + this.#statsText() + text.slice(last);
  }

  #flushPending(): void {
    this.#flushScheduled = false;
    if (this.#pending !== "" && !this.#finished && this.#sink !== undefined) {
      const text = this.#pending;
      this.#pending = "";
      if (!this.#sink.write(text)) this.#body.pause();
    }
    // After the write: the client has the tokens before the pool reads them.
    this.#observePassed();
  }

  #data(chunk: Buffer): void {
    this.#pending += this.#relayed(this.#cutter.push(chunk));
    if (this.#pending === "" || this.#flushScheduled) return;
    this.#flushScheduled = true;
    setImmediate(this.#flush);
  }

  #closeSink(text: string): void {
    if (this.#sink === undefined) {
      this.#unsentClose = text;
      return;
    }
    try {
      this.#sink?.close(text);
    } catch {
      // The client is already gone; nothing left to tell it.
    }
  }

  #end(): void {
    if (this.#finished) return;
    this.#finished = true;
    const last = this.#cutter.end();
    // An engine that ends without [DONE] still gets its stats written, at the end.
    const text = this.#pending + (last === undefined ? "" : this.#relayed(last)) + this.#statsText();
    this.#pending = "";
    this.#closeSink(text);
    this.#attempt.end("completed", this.#lastByteMs, this.#factsNow());
  }

  #error(error: Error): void {
    if (this.#finished) return;
    // No sink yet: the events that came before the error are the stream's, ahead of the error event.
    const early = this.#early;
    this.#early = undefined;
    for (const chunk of early ?? []) this.#pending += this.#relayed(this.#cutter.push(chunk));
    this.#finished = true;
    const req = this.#req;
    const aborted = req.signal.aborted;
    if (!aborted) console.error(`agentix pool: call ${req.callId}: engine ${req.engine.id} broke off the stream (${describe(error)})`);
    // The edge relays this event as is: a fixed message and the call's ID, nothing of the engine.
    const message = `${aborted ? CALL_ERROR_MESSAGES.call_cancelled : CALL_ERROR_MESSAGES.engine_stream_error} (request ${req.callId})`;
    const text = this.#pending + latin1Of(dataEvent(callErrorBody(502, message, req.callId, { code: "engine_stream_error" }))) + this.#statsText();
    this.#pending = "";
    this.#closeSink(text);
    this.#attempt.end(aborted ? "aborted" : "failed", this.#lastByteMs, this.#factsNow());
  }

  /** The client went away mid-stream: what the engine had reported so far is its work for the call. */
  #clientGone(): void {
    if (!this.#finished) {
      this.#finished = true;
      this.#attempt.end("aborted", undefined, this.#factsNow());
    }
    this.#body.abort(new Error("client gone"));
  }
}
