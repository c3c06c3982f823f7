import { type Dispatcher, fetch } from "undici";
import type { Clock } from "../core/clock.js";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { Header } from "../protocol/headers.js";
import { dataEvent, eventObject, formatEvent, isDoneEvent, SseEventSplitter } from "../protocol/sse.js";
import { type PoolCallStats, statsCommentEvent, statsHeaders } from "../protocol/stats.js";
import { CALL_ERROR_MESSAGES, callErrorBody, callErrorResponse, engineRequestErrorResponse } from "./call-errors.js";
import { answerFactsReader, type CallFacts } from "./call-facts.js";
import type { CallApi } from "./engine-request.js";
import type { EngineAdapter } from "./engines/adapter.js";
import type { CallOutcome } from "./metrics.js";

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
  /** Aborts the engine request: client gone, or the pool shutting down. */
  signal: AbortSignal;
  http: Dispatcher;
  clock: Clock;
  /**
   * The service an attempt is charged, from its wall time and what the engine reported
   * (the pool core's rule); absent: the wall time. Sent to the edge in the call's stats.
   */
  serviceOf?(wallMs: number, facts: CallFacts | undefined): number;
  /**
   * Called exactly once when the engine is done with an attempt that got past its
   * first byte or was aborted; not for a "failed" start (the caller handles that).
   */
  onEnd(end: RelayEnd): void;
}

export type RelayStart =
  | { kind: "response"; response: Response }
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

function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

function describe(error: unknown): string {
  const code = errorCode(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return [code, cause ?? message].filter(Boolean).join(": ");
}

const round = (ms: number): number => Math.max(0, Math.round(ms));

/** Engine answers that are the pool's problem, not the request's: credentials refused, rate limited. */
const REFUSED_THE_POOL = new Set([401, 403, 407, 429]);
/** Characters of an engine's error text kept for the log. */
const LOGGED_TEXT_CHARS = 500;

const PASSED_RESPONSE_HEADERS = ["content-type"];

export async function relayToEngine(req: RelayRequest): Promise<RelayStart> {
  const { engine, clock } = req;
  let ended = false;
  const charge = (wallMs: number, facts: CallFacts | undefined): number => round(req.serviceOf?.(wallMs, facts) ?? wallMs);
  /** Ends the attempt once; returns the service it is charged. */
  const end = (outcome: CallOutcome, wallMs = clock.now() - req.dispatchedAt, facts?: CallFacts): number => {
    const serviceMs = charge(wallMs, facts);
    if (ended) return serviceMs;
    ended = true;
    req.onEnd({ wallMs: round(wallMs), serviceMs, outcome, ...(facts === undefined ? {} : { facts }) });
    return serviceMs;
  };
  const stats = (serviceMs: number): PoolCallStats => ({
    engine: req.statsEngineId ?? engine.id,
    queueMs: round(req.queueMs),
    serviceMs: round(serviceMs),
  });

  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: req.stream ? "text/event-stream" : "application/json",
    "x-request-id": req.callId,
  };
  if (engine.apiKey) headers.authorization = `Bearer ${engine.apiKey}`;

  let upstream: Awaited<ReturnType<typeof fetch>>;
  try {
    upstream = await fetch(`${engine.url}${req.path}`, {
      method: "POST",
      headers,
      body: JSON.stringify(req.body),
      signal: req.signal,
      dispatcher: req.http,
    });
  } catch (error) {
    if (req.signal.aborted) {
      end("aborted");
      return { kind: "aborted" };
    }
    const code = errorCode(error);
    return {
      kind: "failed",
      reason: `engine ${engine.id} unreachable (${describe(error)})`,
      connectionFailed: code !== undefined && CONNECTION_ERROR_CODES.has(code),
    };
  }

  if (!upstream.ok && (upstream.status >= 500 || upstream.status < 400 || REFUSED_THE_POOL.has(upstream.status))) {
    const detail = await upstream.text().then(
      (text) => text.slice(0, LOGGED_TEXT_CHARS),
      () => "",
    );
    return {
      kind: "failed",
      reason: `engine ${engine.id} answered ${upstream.status}${detail ? `: ${detail}` : ""}`,
      connectionFailed: false,
    };
  }

  const contentType = upstream.headers.get("content-type") ?? "";
  if (upstream.ok && req.stream && contentType.includes("text/event-stream") && upstream.body) {
    return { kind: "response", response: relayEventStream(upstream.body, req, stats, charge, end) };
  }

  // Non-streaming (or an engine that answered a stream request with a whole body).
  let bytes: ArrayBuffer;
  try {
    bytes = await upstream.arrayBuffer();
  } catch (error) {
    if (req.signal.aborted) {
      end("aborted");
      return { kind: "aborted" };
    }
    const serviceMs = end("failed");
    console.error(`agentix pool: call ${req.callId}: engine ${engine.id} broke off its response (${describe(error)})`);
    return {
      kind: "response",
      response: callErrorResponse(502, CALL_ERROR_MESSAGES.engine_response_error, req.callId, {
        code: "engine_response_error",
        headers: statsHeaders(stats(serviceMs)),
      }),
    };
  }
  const serviceMs = end(upstream.ok ? "completed" : "client_error", clock.now() - req.dispatchedAt, upstream.ok ? answerFactsReader(req.api).fromJsonBytes(bytes) : undefined);
  if (!upstream.ok) {
    // A 4xx about the request: its message is the tenant's, redacted; the engine's own text goes to the log.
    const text = new TextDecoder().decode(bytes);
    console.warn(`agentix pool: call ${req.callId}: engine ${engine.id} refused the request with ${upstream.status}: ${text.slice(0, LOGGED_TEXT_CHARS)}`);
    return {
      kind: "response",
      response: engineRequestErrorResponse(upstream.status as ContentfulStatusCode, text, req.callId, statsHeaders(stats(serviceMs))),
    };
  }
  const responseHeaders = new Headers(statsHeaders(stats(serviceMs)));
  for (const name of PASSED_RESPONSE_HEADERS) {
    const value = upstream.headers.get(name);
    if (value !== null) responseHeaders.set(name, value);
  }
  return { kind: "response", response: new Response(bytes, { status: upstream.status, headers: responseHeaders }) };
}

const NATIVE_FINAL_EVENTS: Partial<Record<CallApi, ReadonlySet<string>>> = {
  messages: new Set(["message_stop"]),
  responses: new Set(["response.completed", "response.incomplete", "response.failed"]),
};

/** A Messages or Responses stream's last event (they end without `[DONE]`). */
function endsNativeStream(api: CallApi, event: string): boolean {
  const finals = NATIVE_FINAL_EVENTS[api];
  // A text test first: only an event naming one of them is parsed (engines need not write an `event:` line).
  if (finals === undefined || ![...finals].some((type) => event.includes(`"${type}"`))) return false;
  const type = eventObject(event)?.type;
  return typeof type === "string" && finals.has(type);
}

function relayEventStream(
  body: ReadableStream<Uint8Array>,
  req: RelayRequest,
  stats: (serviceMs: number) => PoolCallStats,
  charge: (wallMs: number, facts: CallFacts | undefined) => number,
  end: (outcome: CallOutcome, wallMs?: number, facts?: CallFacts) => number,
): Response {
  const encoder = new TextEncoder();
  const events = body.pipeThrough(new SseEventSplitter()).getReader();
  const facts = answerFactsReader(req.api).stream();
  let lastByteMs: number | undefined;
  let statsWritten = false;

  const writeStats = (controller: ReadableStreamDefaultController<Uint8Array>): void => {
    lastByteMs ??= req.clock.now() - req.dispatchedAt;
    if (!statsWritten) controller.enqueue(encoder.encode(statsCommentEvent(stats(charge(lastByteMs, facts.facts())))));
    statsWritten = true;
  };

  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      let next: Awaited<ReturnType<typeof events.read>>;
      try {
        next = await events.read();
      } catch (error) {
        const aborted = req.signal.aborted;
        if (!aborted) console.error(`agentix pool: call ${req.callId}: engine ${req.engine.id} broke off the stream (${describe(error)})`);
        // The edge relays this event as is: a fixed message and the call's ID, nothing of the engine.
        const message = `${aborted ? CALL_ERROR_MESSAGES.call_cancelled : CALL_ERROR_MESSAGES.engine_stream_error} (request ${req.callId})`;
        try {
          controller.enqueue(encoder.encode(dataEvent(callErrorBody(502, message, req.callId, { code: "engine_stream_error" }))));
          writeStats(controller);
          controller.close();
        } catch {
          // The client is already gone; nothing left to tell it.
        }
        end(aborted ? "aborted" : "failed", lastByteMs, facts.facts());
        return;
      }
      if (next.done) {
        // An engine that ends without [DONE] still gets its stats written, at the end.
        writeStats(controller);
        controller.close();
        end("completed", lastByteMs, facts.facts());
        return;
      }
      const done = isDoneEvent(next.value);
      if (!done) facts.observe(next.value);
      // Before the stream's last event, read by then, so a client that hangs up once it has the end still leaves the edge the stats.
      if (done || endsNativeStream(req.api, next.value)) writeStats(controller);
      controller.enqueue(encoder.encode(formatEvent(next.value)));
    },
    async cancel(reason) {
      // The edge went away mid-stream: what the engine had reported so far is its work for the call.
      end("aborted", undefined, facts.facts());
      await events.cancel(reason).catch(() => undefined);
    },
  });

  return new Response(stream, {
    status: 200,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      // Known from the start, so a stream cut before its stats comment still says where it ran.
      [Header.engine]: req.statsEngineId ?? req.engine.id,
      [Header.queueMs]: String(round(req.queueMs)),
    },
  });
}
