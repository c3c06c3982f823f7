import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import type { Clock } from "../core/clock.js";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { statsHeaders } from "../protocol/stats.js";
import { CALL_ERROR_MESSAGES, callErrorResponse, engineRequestErrorResponse } from "./call-errors.js";
import { answerFactsReader, type CallFacts } from "./call-facts.js";
import { DirectAnswer, headerList } from "./direct-answer.js";
import type { CallApi } from "./engine-request.js";
import type { EngineAdapter } from "./engines/adapter.js";
import type { CallOutcome } from "./metrics.js";
import type { AttemptSignal } from "./attempt-abort.js";
import { type EngineAnswerListener, EngineExchange } from "./engine-exchange.js";
import { describe, errorCode, RelayAttempt } from "./relay-attempt.js";
import { relayEventStream } from "./relay-event-stream.js";

/*
 * One attempt of one call on one engine. Retry is decided by the caller from the
 * start result: only a failure before the engine's first byte (no connection, or a
 * 5xx status) is retryable, since nothing has reached the client and the engine
 * produced nothing usable. Once the engine answers 2xx the attempt is committed:
 *
 * - non-streaming: the whole body is read, then relayed with the stats headers;
 *   a body that breaks off becomes a 502.
 * - streaming: events are relayed as they arrive; the stats comment goes just
 *   before `data: [DONE]`, or a Messages or Responses stream's last event (the engine and queue time are also headers of the
 *   response, known from its start, for a stream cut before the comment). If the engine breaks off mid-stream the client gets an
 *   OpenAI-shaped `data: {"error":…}` event, then the stats comment, and the stream
 *   ends WITHOUT `data: [DONE]`, so a client can tell it was cut short.
 * - 4xx about the request (a prompt over the context, an unknown model): its status,
 *   code and message (redacted and capped: call-errors.ts), not retried, since the
 *   request is at fault. 401/403/407 (the engine refused the pool's credentials) and
 *   429 (the engine is rate-limiting the pool) are not the request's fault: they fail
 *   the attempt like a 5xx, and are retried elsewhere.
 *
 * What a tenant reads of a failure is a fixed message with the call's ID; the details
 * (engine, errno, the engine's text) go to the log with that ID (call-errors.ts).
 *
 * A completed attempt also reports what the answer said about the call (usage, tool
 * calls: call-facts.ts), read from the body it holds or from the events as they pass.
 */

export interface EngineTarget {
  id: string;
  /** Base URL without `/v1`. */
  url: string;
  apiKey?: string | undefined;
  adapter: EngineAdapter;
}

export interface RelayEnd {
  /** Wall time from dispatch to the engine's last byte (or to the abort), ms. */
  wallMs: number;
  /** The service the attempt is charged (RelayRequest.serviceOf), ms: what its stats said. */
  serviceMs: number;
  outcome: CallOutcome;
  /**
   * Usage and tool calls as far as the engine reported them: of a completed answer, or
   * of a stream cut short (client gone, engine broke off), whose usage is then the
   * engine's count up to the last chunk read (engines asked for continuous usage).
   */
  facts?: CallFacts;
}

export interface RelayRequest {
  engine: EngineTarget;
  callId: string;
  /** The API the body and the answer are in: where the answer's usage and tool calls are read from. */
  api: CallApi;
  /** The engine's path for that API (chat completions, completions, …). */
  path: string;
  /** The body the engine receives (already shaped by its adapter). */
  body: Record<string, unknown>;
  stream: boolean;
  queueMs: number;
  /** The engine the call's stats name, when not the one relayed from: a split call's prefill engine, which holds the program's prefix for its next call. */
  statsEngineId?: string | undefined;
  dispatchedAt: number;
  /** Aborts the engine request: client gone, or the pool shutting down (attempt-abort.ts). */
  signal: AttemptSignal;
  http: Dispatcher;
  clock: Clock;
  /**
   * The service an attempt is charged, from its wall time and what the engine reported
   * (the pool core's rule); absent: the wall time. Sent to the edge in the call's stats.
   */
  serviceOf?(wallMs: number, facts: CallFacts | undefined): number;
  /**
   * False when serviceOf charges the wall time whatever the facts say (the engine has
   * no cost model): a whole answer's facts are then read after it is written. Default true.
   */
  serviceReadsFacts?: boolean;
  /**
   * Called exactly once when the engine is done with an attempt that got past its
   * first byte or was aborted; not for a "failed" start (the caller handles that).
   */
  onEnd(end: RelayEnd): void;
  /**
   * A whole answer's onEnd waits until the answer has left: written straight to the
   * client, or its Response handed out (direct-answer.ts), at the latest until the
   * promise chain that hands it over has run (the next tick). The attempt's bookkeeping
   * (its slot, metrics, TAO's signals, the next queued call's start) shapes nothing of
   * the answer, so the client need not wait for it. The start says so (`endPending`).
   * Default false: onEnd before the start resolves (the split flows read the end then).
   * An engine's refusal (4xx) or a body that broke off ends at once either way.
   */
  endAfterAnswer?: boolean;
  /**
   * A whole answer's start (endPending), handed over at once where it is built: inside
   * undici's callback of the engine's last byte, so the pool's server can write it before
   * undici's own work on that response (7 µs p50 in bench:hop's probes) and the promise
   * hops after it. The returned promise still resolves with the same start. The attempt's
   * end that follows an answer written in here waits for a microtask: its slot's next call
   * must not be dispatched into undici from within undici's callback.
   */
  onWholeAnswer?(start: RelayStart): void;
}

export type RelayStart =
  /**
   * `response`: the answer as a Response (built when first read, for a `direct` one);
   * `direct`: the answer the pool's server writes straight (direct-answer.ts);
   * `endPending`: a whole answer whose onEnd follows its leaving (RelayRequest.endAfterAnswer).
   */
  | { kind: "response"; readonly response: Response; direct?: DirectAnswer; endPending?: boolean }
  /** Retryable: the engine failed before its first byte. */
  | { kind: "failed"; reason: string; connectionFailed: boolean }
  | { kind: "aborted" };

const CONNECTION_ERROR_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

/** Engine answers that are the pool's problem, not the request's: credentials refused, rate limited. */
const REFUSED_THE_POOL = new Set([401, 403, 407, 429]);
/** Characters of an engine's error text kept for the log. */
const LOGGED_TEXT_CHARS = 500;

const PASSED_RESPONSE_HEADERS = ["content-type"];

/** One decoder for all (decode() without `stream` keeps no state between calls). */
const UTF8 = new TextDecoder();

export function relayToEngine(req: RelayRequest): Promise<RelayStart> {
  return new Promise((resolve) => {
    new EngineRelay(req, resolve).send();
  });
}

/** What the relay does with the engine's answer once its status is known. */
const enum Reading {
  /** No status yet. */
  Head,
  /** A failure before the first byte of an answer (5xx, 3xx, the pool refused): its text for the log, then the retryable start. */
  Failure,
  /** A whole body (non-streaming, or a 4xx about the request). */
  Whole,
  /** An event stream, handed to the stream relay (relay-event-stream.ts). */
  Stream,
}

/**
 * One attempt's engine request and what it starts, heard through undici's dispatch()
 * (engine-exchange.ts). A class: see relay-attempt.ts.
 */
class EngineRelay implements EngineAnswerListener {
  readonly #req: RelayRequest;
  readonly #attempt: RelayAttempt;
  readonly #resolve: (start: RelayStart) => void;
  #exchange: EngineExchange | undefined;
  #reading = Reading.Head;
  #status = 0;
  #headers: IncomingHttpHeaders = {};
  readonly #chunks: Buffer[] = [];
  /** True while a whole answer is handed over inside undici's callback (RelayRequest.onWholeAnswer). */
  #handingOverInline = false;
  #size = 0;

  constructor(req: RelayRequest, resolve: (start: RelayStart) => void) {
    this.#req = req;
    this.#attempt = new RelayAttempt(req);
    this.#resolve = resolve;
  }

  send(): void {
    const req = this.#req;
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: req.stream ? "text/event-stream" : "application/json",
      "x-request-id": req.callId,
    };
    if (req.engine.apiKey) headers.authorization = `Bearer ${req.engine.apiKey}`;
    /*
     * undici's dispatch() (engine-exchange.ts), not fetch(): fetch builds a WHATWG
     * Request, Response and body stream per call (~7.5 % of the pool's busy time in
     * bench:proxy's profile) and hands every chunk through promise hops. What fetch did
     * beside that and the pool does not need: following redirects (an engine does not
     * redirect; a 3xx fails the attempt, as it did) and decompressing (nothing asks for
     * a compressed body).
     */
    const { origin, basePath } = engineOrigin(req.engine.url);
    this.#exchange = EngineExchange.send(req.http, { origin, path: `${basePath}${req.path}`, headers, body: JSON.stringify(req.body) }, req.signal, this);
  }

  start(status: number, headers: IncomingHttpHeaders): void {
    this.#status = status;
    this.#headers = headers;
    const ok = status >= 200 && status < 300;
    if (!ok && (status >= 500 || status < 400 || REFUSED_THE_POOL.has(status))) {
      this.#reading = Reading.Failure;
      return;
    }
    const contentType = headerValue(headers["content-type"]) ?? "";
    const exchange = this.#exchange;
    if (ok && this.#req.stream && contentType.includes("text/event-stream") && exchange !== undefined) {
      this.#reading = Reading.Stream;
      this.#resolve(directStart(relayEventStream(exchange, this.#req, this.#attempt), false));
      return;
    }
    // Non-streaming (or an engine that answered a stream request with a whole body).
    this.#reading = Reading.Whole;
  }

  data(chunk: Buffer): void {
    // A failure's text is kept for the log only: its first characters.
    if (this.#reading === Reading.Failure && this.#size >= LOGGED_TEXT_CHARS) return;
    this.#chunks.push(chunk);
    this.#size += chunk.byteLength;
  }

  end(): void {
    if (this.#reading === Reading.Failure) return this.#failed(this.#text().slice(0, LOGGED_TEXT_CHARS));
    this.#whole(this.#chunks.length === 1 ? (this.#chunks[0] as Buffer) : Buffer.concat(this.#chunks, this.#size));
  }

  error(error: Error): void {
    const req = this.#req;
    const attempt = this.#attempt;
    if (this.#reading === Reading.Failure) return this.#failed("");
    if (req.signal.aborted) {
      attempt.end("aborted");
      return this.#resolve({ kind: "aborted" });
    }
    if (this.#reading === Reading.Head) {
      const code = errorCode(error);
      return this.#resolve({
        kind: "failed",
        reason: `engine ${req.engine.id} unreachable (${describe(error)})`,
        connectionFailed: code !== undefined && CONNECTION_ERROR_CODES.has(code),
      });
    }
    const wallMs = req.clock.now() - req.dispatchedAt;
    console.error(`agentix pool: call ${req.callId}: engine ${req.engine.id} broke off its response (${describe(error)})`);
    const serviceMs = attempt.end("failed", wallMs);
    const response = callErrorResponse(502, CALL_ERROR_MESSAGES.engine_response_error, req.callId, {
      code: "engine_response_error",
      headers: statsHeaders(attempt.stats(serviceMs)),
    });
    this.#resolve({ kind: "response", response });
  }

  #text(): string {
    return UTF8.decode(this.#chunks.length === 1 ? this.#chunks[0] : Buffer.concat(this.#chunks, this.#size));
  }

  #failed(detail: string): void {
    this.#resolve({
      kind: "failed",
      reason: `engine ${this.#req.engine.id} answered ${this.#status}${detail ? `: ${detail}` : ""}`,
      connectionFailed: false,
    });
  }

  #whole(bytes: Uint8Array): void {
    const req = this.#req;
    const attempt = this.#attempt;
    const status = this.#status;
    const wallMs = req.clock.now() - req.dispatchedAt;
    if (status < 200 || status >= 300) {
      // A 4xx about the request: its message is the tenant's, redacted; the engine's own text goes to the log.
      const serviceMs = attempt.end("client_error", wallMs);
      const text = UTF8.decode(bytes);
      console.warn(`agentix pool: call ${req.callId}: engine ${req.engine.id} refused the request with ${status}: ${text.slice(0, LOGGED_TEXT_CHARS)}`);
      return this.#resolve({ kind: "response", response: engineRequestErrorResponse(status as ContentfulStatusCode, text, req.callId, statsHeaders(attempt.stats(serviceMs))) });
    }
    /*
     * The answer's usage and tool calls (call-facts.ts) are read after it is written when
     * its service does not depend on them (no cost model for the engine: the wall time
     * is charged): a JSON parse of the whole body that the client need not wait for.
     */
    const factsFirst = req.endAfterAnswer !== true || req.serviceReadsFacts !== false;
    const early = factsFirst ? answerFactsReader(req.api).fromJsonBytes(bytes) : undefined;
    const responseHeaders: Record<string, string> = statsHeaders(attempt.stats(attempt.charge(wallMs, early)));
    for (const name of PASSED_RESPONSE_HEADERS) {
      const value = headerValue(this.#headers[name]);
      if (value !== undefined) responseHeaders[name] = value;
    }
    const answer = new DirectAnswer(
      // A Uint8Array body and plain headers: @hono/node-server writes it in one go, without a web stream.
      () => new Response(bytes, { status, headers: responseHeaders }),
      // Behind the pool's server, written as is with its plain headers: no Headers object built and read back.
      (outgoing, extraHeaders) => {
        const head = headerList(responseHeaders, extraHeaders);
        head.push("content-length", String(bytes.byteLength));
        outgoing.writeHead(status, head);
        outgoing.end(bytes);
      },
    );
    if (req.endAfterAnswer !== true) {
      attempt.end("completed", wallMs, early);
      return this.#resolve(directStart(answer, false));
    }
    answer.afterHandingOver(() => {
      if (this.#handingOverInline) queueMicrotask(() => this.#completed(wallMs, early, bytes));
      else this.#completed(wallMs, early, bytes);
    });
    const start = directStart(answer, true);
    if (req.onWholeAnswer !== undefined) {
      this.#handingOverInline = true;
      try {
        req.onWholeAnswer(start);
      } finally {
        this.#handingOverInline = false;
      }
    }
    this.#resolve(start);
    /*
     * A bound for an answer nobody writes or reads at once (a translation reads it
     * later): the attempt ends at the next tick after the promise chain that hands the
     * answer over has run (a tick queued from a microtask runs once the microtasks are done).
     */
    queueMicrotask(() => process.nextTick(() => this.#completed(wallMs, early, bytes)));
  }

  /** A whole answer's end, once: its facts read now if they were not before. */
  #completed(wallMs: number, early: CallFacts | undefined, bytes: Uint8Array): void {
    if (this.#attempt.ended) return;
    this.#attempt.end("completed", wallMs, early ?? answerFactsReader(this.#req.api).fromJsonBytes(bytes));
  }
}

/** The start of an answer the server may write straight; its Response is built when first read. */
function directStart(answer: DirectAnswer, endPending: boolean): RelayStart {
  return new DirectStart(answer, endPending);
}

/**
 * A class: a getter in an object literal is defined on every object made (0.5 µs a start
 * in a warm loop, with the spread of `endPending` it had), a class's once on its prototype.
 */
class DirectStart {
  readonly kind = "response";
  readonly direct: DirectAnswer;
  readonly endPending?: boolean;

  constructor(direct: DirectAnswer, endPending: boolean) {
    this.direct = direct;
    if (endPending) this.endPending = true;
  }

  get response(): Response {
    return this.direct.response();
  }
}

/** A Node header value as one string (a repeated header joined as fetch's Headers would). */
function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

const ORIGINS = new Map<string, { origin: string; basePath: string }>();

/** An engine URL's origin and path prefix (without a trailing slash), parsed once per URL. */
function engineOrigin(url: string): { origin: string; basePath: string } {
  let parsed = ORIGINS.get(url);
  if (parsed === undefined) {
    const u = new URL(url);
    parsed = { origin: u.origin, basePath: u.pathname.replace(/\/+$/, "") };
    ORIGINS.set(url, parsed);
  }
  return parsed;
}
