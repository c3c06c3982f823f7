import { ChatCompletion } from "../../protocol/chat.js";
import { OpenAIErrorBody, openAIErrorBody } from "../../protocol/errors.js";
import { Header, RateLimitHeader } from "../../protocol/headers.js";
import { statsFromHeaders } from "../../protocol/stats.js";
import type { SettleCallInput } from "../program/types.js";
import { relayEventStream, type StreamEnd } from "./relay-stream.js";
import { type CallObservation, settlementOf } from "./settlement.js";
import { SseRelayFilter } from "./sse-filter.js";

/** One forwarded call, as the relays need it. */
export interface ForwardedCall {
  programId: string;
  callId: string;
  /** When the edge sent the call to the pool (ms). */
  sentAt: number;
  promptEstimate: number;
  includeUsage: boolean;
  /** Settles the call after the response (ctx.waitUntil); called exactly once per call. */
  settle: (settlement: SettleCallInput | Promise<SettleCallInput>) => void;
}

type Observed = Omit<CallObservation, "promptEstimate">;

function settleWith(call: ForwardedCall, seen: Observed): SettleCallInput {
  return settlementOf(call.callId, { ...seen, promptEstimate: call.promptEstimate });
}

function jsonHeaders(call: ForwardedCall, extra: Record<string, string> = {}): Headers {
  return new Headers({ "content-type": "application/json", [Header.program]: call.programId, ...extra });
}

function errorResponse(call: ForwardedCall, status: number, body: unknown, extra?: Record<string, string>): Response {
  return new Response(JSON.stringify(body), { status, headers: jsonHeaders(call, extra) });
}

function parseJson(bytes: ArrayBuffer): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/**
 * The pool could not be reached, or the client left before it answered. A
 * call that never reached an engine is settled with nothing used.
 */
export function unanswered(call: ForwardedCall, clientGone: boolean): Response {
  const finishedAt = Date.now();
  call.settle(
    settleWith(call, {
      status: clientGone ? "cancelled" : "error",
      served: false,
      outputChunks: 0,
      observedTiming: { queueMs: finishedAt - call.sentAt, serviceMs: 0 },
      finishedAt,
    }),
  );
  if (clientGone) {
    // Nobody reads this; 499 (client closed request) keeps logs honest.
    return errorResponse(call, 499, openAIErrorBody(499, "Client closed the request.", { code: "client_closed" }));
  }
  return errorResponse(
    call,
    502,
    openAIErrorBody(502, "The GPU pool could not be reached; retry shortly.", { code: "pool_unreachable" }),
  );
}

/**
 * A non-2xx answer from the pool: relayed with its status and OpenAI error body
 * (and Retry-After). A 401/403 means the pool refused the edge's signature, a
 * deployment fault the client must not mistake for its own key: it becomes 502.
 */
export async function relayPoolError(pool: Response, call: ForwardedCall): Promise<Response> {
  const bytes = await pool.arrayBuffer().catch(() => new ArrayBuffer(0));
  const finishedAt = Date.now();
  const stats = statsFromHeaders(pool.headers);
  call.settle(
    settleWith(call, {
      status: "error",
      served: false,
      ...(stats ? { stats } : {}),
      outputChunks: 0,
      observedTiming: { queueMs: finishedAt - call.sentAt, serviceMs: 0 },
      finishedAt,
    }),
  );
  if (pool.status === 401 || pool.status === 403) {
    console.error(`Pool refused the edge's call (HTTP ${pool.status}): check POOL_SIGNING_SECRET on both sides.`);
    return errorResponse(
      call,
      502,
      openAIErrorBody(502, "The GPU pool refused the edge's credentials.", { code: "pool_rejected_edge" }),
    );
  }
  const retryAfter = pool.headers.get(RateLimitHeader.retryAfter);
  const extra: Record<string, string> = retryAfter ? { [RateLimitHeader.retryAfter]: retryAfter } : {};
  if (OpenAIErrorBody.safeParse(parseJson(bytes)).success) {
    return new Response(bytes, { status: pool.status, headers: jsonHeaders(call, extra) });
  }
  return errorResponse(
    call,
    pool.status,
    openAIErrorBody(pool.status, `The GPU pool could not serve the call (HTTP ${pool.status}).`),
    extra,
  );
}

/** A non-streaming completion: the pool's body relayed byte for byte; figures from its usage and stats headers. */
export async function relayJson(pool: Response, call: ForwardedCall, clientSignal: AbortSignal): Promise<Response> {
  const stats = statsFromHeaders(pool.headers);
  let bytes: ArrayBuffer;
  try {
    bytes = await pool.arrayBuffer();
  } catch {
    // The pool answered, so the engine did the work: it is charged (prompt estimate, service) even though the body broke.
    const finishedAt = Date.now();
    const clientGone = clientSignal.aborted;
    call.settle(
      settleWith(call, {
        status: clientGone ? "cancelled" : "error",
        served: true,
        ...(stats ? { stats } : {}),
        outputChunks: 0,
        observedTiming: { queueMs: 0, serviceMs: finishedAt - call.sentAt },
        finishedAt,
      }),
    );
    return clientGone
      ? errorResponse(call, 499, openAIErrorBody(499, "Client closed the request.", { code: "client_closed" }))
      : errorResponse(
          call,
          502,
          openAIErrorBody(502, "The GPU pool's answer broke off; retry shortly.", { code: "pool_response_broken" }),
        );
  }
  const finishedAt = Date.now();
  const completion = ChatCompletion.safeParse(parseJson(bytes));
  const usage = completion.success ? completion.data.usage ?? undefined : undefined;
  call.settle(
    settleWith(call, {
      status: "ok",
      served: true,
      ...(usage ? { usage } : {}),
      ...(stats ? { stats } : {}),
      outputChunks: 0,
      observedTiming: { queueMs: 0, serviceMs: finishedAt - call.sentAt },
      finishedAt,
    }),
  );
  return new Response(bytes, {
    status: pool.status,
    headers: jsonHeaders(call, { "content-type": pool.headers.get("content-type") ?? "application/json" }),
  });
}

const STATUS_OF_END: Record<StreamEnd, "ok" | "error" | "cancelled"> = {
  complete: "ok",
  cancelled: "cancelled",
  failed: "error",
};

/**
 * A streaming completion: events relayed as they arrive (see SseRelayFilter for
 * what is dropped). The call settles when the stream ends, however it ends; a
 * stream that closes without `data: [DONE]` settles as an error.
 */
export function relayStream(pool: Response, call: ForwardedCall): Response {
  const respondedAt = Date.now();
  const filter = new SseRelayFilter(call.includeUsage);
  const source = pool.body ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
  const { body, ended } = relayEventStream(source, filter);
  call.settle(
    ended.then((end) => {
      const finishedAt = Date.now();
      const status = end === "complete" && !filter.sawDone ? "error" : STATUS_OF_END[end];
      return settleWith(call, {
        status,
        served: true,
        ...(filter.usage ? { usage: filter.usage } : {}),
        ...(filter.stats ? { stats: filter.stats } : {}),
        outputChunks: filter.outputChunks,
        observedTiming: { queueMs: respondedAt - call.sentAt, serviceMs: finishedAt - respondedAt },
        finishedAt,
      });
    }),
  );
  return new Response(body, {
    status: pool.status,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      [Header.program]: call.programId,
    },
  });
}
