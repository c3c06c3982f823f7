import type { Usage } from "../../protocol/chat.js";
import { isOpenAIErrorType, OpenAIErrorBody, openAIErrorBody } from "../../protocol/errors.js";
import { Header, type ProgramSource, RateLimitHeader } from "../../protocol/headers.js";
import { statsFromHeaders } from "../../protocol/stats.js";
import type { SettleCallInput } from "../program/types.js";
import { relayEventStream, type StreamEnd, type StreamWatch } from "./relay-stream.js";
import { type CallObservation, settlementOf } from "./settlement.js";
import type { StreamRelayFilter } from "./sse-filter.js";

/** One forwarded call, as the relays need it. */
export interface ForwardedCall {
  programId: string;
  callId: string;
  /** When the edge sent the call to the pool (ms). */
  sentAt: number;
  promptEstimate: number;
  /** The directory ID of the pool the call was last sent to; "" while none. */
  pool: string;
  /** The usage in the API's whole answer (CallApiSpec.usageOf). */
  usageOf: (answer: unknown) => Usage | undefined;
  /** A fresh filter for the API's stream (CallApiSpec.streamFilter). */
  streamFilter: () => StreamRelayFilter;
  /**
   * Told what a call that finished carried: its whole answer (JSON, or a stream's last
   * event when it carries one) and, for a stream, the reply its filter put together.
   * Called before the client sees the answer's end, which waits (at most
   * FINISHED_WAIT_MS) for the work it returns: what it records (the reply that links
   * the next call, a stored response) is there when an agent's next call comes at once.
   */
  onFinished?: (finished: { answer?: unknown; reply?: string | undefined }) => Promise<void> | void;
  /** How the call found its program (x-agentix-program-source). */
  programSource: ProgramSource;
  /** Settles the call after the response (ctx.waitUntil); the first call wins, later ones are ignored. */
  settle: (settlement: SettleCallInput | Promise<SettleCallInput>) => void;
}

/** The longest an answer's end waits for what onFinished records (a slow write goes on in the background). */
export const FINISHED_WAIT_MS = 1_000;

/** Tells the call what it carried and waits for what that records, at most FINISHED_WAIT_MS. */
const finished = (call: ForwardedCall, what: { answer?: unknown; reply?: string | undefined }): Promise<void> =>
  waitAtMost(call.onFinished?.(what), FINISHED_WAIT_MS);

/** Resolves when `work` settles or after `ms`, whichever is first; never rejects. */
function waitAtMost(work: Promise<unknown> | void, ms: number): Promise<void> {
  if (work === undefined) return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    work.then(done, done);
  });
}

/** Seconds a client should wait before retrying a call the pool could not take. */
export const POOL_TROUBLE_RETRY_AFTER_S = 2;

/** A pool status that sends the call on to the next pool (before any byte reached the client). */
export const FAILOVER_STATUSES: ReadonlySet<number> = new Set([502, 503]);

type Observed = Omit<CallObservation, "promptEstimate">;

function settleWith(call: ForwardedCall, seen: Observed): SettleCallInput {
  const settlement = settlementOf(call.callId, { ...seen, promptEstimate: call.promptEstimate });
  return call.pool === "" ? settlement : { ...settlement, pool: call.pool };
}

/** The headers every answer to a call carries: its program, its ID, the pool that took it. */
export function callIdentityHeaders(call: Pick<ForwardedCall, "programId" | "callId" | "pool" | "programSource">): Record<string, string> {
  return {
    [Header.program]: call.programId,
    [Header.programSource]: call.programSource,
    [Header.requestId]: call.callId,
    ...(call.pool === "" ? {} : { [Header.pool]: call.pool }),
  };
}

function callHeaders(call: ForwardedCall, extra: Record<string, string> = {}): Headers {
  return new Headers({ "content-type": "application/json", ...callIdentityHeaders(call), ...extra });
}

function errorResponse(call: ForwardedCall, status: number, body: unknown, extra?: Record<string, string>): Response {
  return new Response(JSON.stringify(body), { status, headers: callHeaders(call, extra) });
}

/** A 5xx about the pool: a fixed message naming the request, and Retry-After (the trouble is ours and passing). */
function poolTrouble(call: ForwardedCall, status: number, message: string, code: string): Response {
  return errorResponse(call, status, openAIErrorBody(status, `${message} (request ${call.callId})`, { code }), {
    [RateLimitHeader.retryAfter]: String(POOL_TROUBLE_RETRY_AFTER_S),
  });
}

function clientClosed(call: ForwardedCall): Response {
  // Nobody reads this; 499 (client closed request) keeps logs honest.
  return errorResponse(call, 499, openAIErrorBody(499, "Client closed the request.", { code: "client_closed" }));
}

function callTimedOut(call: ForwardedCall): Response {
  return poolTrouble(call, 504, "The call ran past its time limit and was stopped", "call_timeout");
}

function parseJson(bytes: ArrayBuffer): unknown {
  try {
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
}

/** Why the edge stopped waiting on the pool, in the order that explains it best. */
export type Unanswered = "client_gone" | "timeout" | "unreachable";

/** Why a wait on the pool failed: the client left, the deadline passed, or else the pool's side broke. */
export function whyUnanswered(watch: Pick<StreamWatch, "client" | "deadline">): Unanswered {
  return watch.client.aborted ? "client_gone" : watch.deadline.aborted ? "timeout" : "unreachable";
}

const STATUS_OF_UNANSWERED: Record<Unanswered, SettleCallInput["status"]> = {
  client_gone: "cancelled",
  timeout: "timeout",
  unreachable: "error",
};

/** The answer to a call the edge gave up on; `poolBroke` words the pool's own failure. */
function unansweredResponse(call: ForwardedCall, why: Unanswered, poolBroke: () => Response): Response {
  if (why === "client_gone") return clientClosed(call);
  if (why === "timeout") return callTimedOut(call);
  return poolBroke();
}

/**
 * The pool could not be reached, the client left before it answered, or the
 * call's deadline passed first. A call that never reached an engine is settled
 * with nothing used.
 */
export function unanswered(call: ForwardedCall, why: Unanswered): Response {
  const finishedAt = Date.now();
  call.settle(
    settleWith(call, {
      status: STATUS_OF_UNANSWERED[why],
      served: false,
      outputChunks: 0,
      observedTiming: { queueMs: finishedAt - call.sentAt, serviceMs: 0 },
      finishedAt,
    }),
  );
  return unansweredResponse(call, why, () =>
    poolTrouble(call, 502, "The GPU pool could not be reached; retry shortly", "pool_unreachable"),
  );
}

/**
 * No pool that may serve the call can take it now: every eligible one is down or its
 * breaker open (for a tenant restricted to some regions, no pool there can: the call
 * never leaves them). Settled with nothing used; 503 with Retry-After.
 */
export function noPoolAvailable(call: ForwardedCall): Response {
  const finishedAt = Date.now();
  call.settle(
    settleWith(call, {
      status: "error",
      served: false,
      outputChunks: 0,
      observedTiming: { queueMs: finishedAt - call.sentAt, serviceMs: 0 },
      finishedAt,
    }),
  );
  return poolTrouble(call, 503, "No GPU pool your plan may use can take calls for this model right now; retry shortly", "no_pool_available");
}

/** The pool's own account of a refusal, as the pool's log and the edge's log want it. */
function describePoolError(status: number, bytes: ArrayBuffer): string {
  const text = new TextDecoder().decode(bytes.slice(0, 500));
  return `HTTP ${status}: ${text}`;
}

/**
 * A non-2xx answer from the pool. The tenant gets the status, an OpenAI-shaped
 * body and Retry-After, never the pool's own text for a failure on our side
 * (engine IDs, addresses, errno belong in the log). A 4xx about the request
 * itself (an engine refusing a prompt longer than its context) keeps the pool's
 * message, which the pool already reduced to what concerns the request. A
 * 401/403 means the pool refused the edge's signature, a deployment fault the
 * client must not mistake for its own key: it becomes 502.
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
    console.error(
      `Pool refused the edge's call ${call.callId} (${describePoolError(pool.status, bytes)}): check that pool ${call.pool} holds the key its directory row's signing_key_id names, with the secret the edge holds for it (POOL_SIGNING_KEYS / POOL_SIGNING_SECRET).`,
    );
    return poolTrouble(call, 502, "The GPU pool refused the edge's credentials", "pool_rejected_edge");
  }
  const body = OpenAIErrorBody.safeParse(parseJson(bytes));
  const retryAfter = pool.headers.get(RateLimitHeader.retryAfter);
  if (pool.status >= 400 && pool.status < 500) {
    const extra: Record<string, string> = retryAfter ? { [RateLimitHeader.retryAfter]: retryAfter } : {};
    const relayed = body.success
      ? openAIErrorBody(pool.status, `${body.data.error.message.slice(0, 500)} (request ${call.callId})`, {
          code: body.data.error.code,
          param: body.data.error.param,
          ...(isOpenAIErrorType(body.data.error.type) ? { type: body.data.error.type } : {}),
        })
      : openAIErrorBody(pool.status, `The GPU pool refused the call (request ${call.callId}).`);
    return errorResponse(call, pool.status, relayed, extra);
  }
  console.error(`Pool failed call ${call.callId}: ${describePoolError(pool.status, bytes)}`);
  const status = pool.status >= 500 && pool.status <= 599 ? pool.status : 502;
  const code = body.success && body.data.error.code ? body.data.error.code : "pool_error";
  const response = poolTrouble(call, status, "The GPU pool could not serve the call; retry shortly", code);
  if (retryAfter) response.headers.set(RateLimitHeader.retryAfter, retryAfter);
  return response;
}

/** A non-streaming completion: the pool's body relayed byte for byte; figures from its usage and stats headers. */
export async function relayJson(pool: Response, call: ForwardedCall, watch: StreamWatch): Promise<Response> {
  const stats = statsFromHeaders(pool.headers);
  let bytes: ArrayBuffer;
  try {
    bytes = await pool.arrayBuffer();
  } catch (error) {
    // The pool answered, so the engine did the work: it is charged (prompt estimate, service) even though the body broke.
    const finishedAt = Date.now();
    const why = whyUnanswered(watch);
    if (why === "unreachable") console.error(`The pool's answer to ${call.callId} broke off`, error);
    call.settle(
      settleWith(call, {
        status: STATUS_OF_UNANSWERED[why],
        served: true,
        ...(stats ? { stats } : {}),
        outputChunks: 0,
        observedTiming: { queueMs: 0, serviceMs: finishedAt - call.sentAt },
        finishedAt,
      }),
    );
    return unansweredResponse(call, why, () =>
      poolTrouble(call, 502, "The GPU pool's answer broke off; retry shortly", "pool_response_broken"),
    );
  }
  const finishedAt = Date.now();
  const answer = parseJson(bytes);
  const usage = call.usageOf(answer);
  if (pool.status === 200 && answer !== undefined) {
    await finished(call, { answer });
  }
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
    headers: callHeaders(call, { "content-type": pool.headers.get("content-type") ?? "application/json" }),
  });
}

const STATUS_OF_END: Record<StreamEnd, SettleCallInput["status"]> = {
  complete: "ok",
  cancelled: "cancelled",
  failed: "error",
  timeout: "timeout",
};

/**
 * A streaming completion: events relayed as they arrive (see SseRelayFilter for
 * what is dropped). The call settles when the stream ends, however it ends (see
 * relayEventStream: every end is bounded); a stream that closes without
 * `data: [DONE]` settles as an error.
 */
export function relayStream(pool: Response, call: ForwardedCall, watch: StreamWatch): Response {
  const respondedAt = Date.now();
  // The engine is known from the stream's start: a stream cut before its stats comment still records where it ran.
  const engineAtStart = pool.headers.get(Header.engine) ?? "";
  const filter = call.streamFilter();
  const source = pool.body ?? new ReadableStream<Uint8Array>({ start: (controller) => controller.close() });
  // The stream's last event waits for what its end records (relayEventStream's beforeEnd).
  const { body, ended } = relayEventStream(source, filter, watch, () => finished(call, { answer: filter.answer, reply: filter.reply }));
  call.settle(
    ended.then((end) => {
      const finishedAt = Date.now();
      const observedTiming = { queueMs: respondedAt - call.sentAt, serviceMs: finishedAt - respondedAt };
      const status = end === "complete" && !filter.sawDone ? "error" : STATUS_OF_END[end];
      // A finished stream whose engine put its usage in the last output chunk: that figure is whole.
      const usage = filter.usage ?? (end === "complete" && filter.sawDone ? filter.partialUsage : undefined);
      const stats = filter.stats ?? (engineAtStart ? { engine: engineAtStart, ...observedTiming } : undefined);
      return settleWith(call, {
        status,
        served: true,
        ...(usage ? { usage } : {}),
        ...(filter.partialUsage ? { partialUsage: filter.partialUsage } : {}),
        ...(stats ? { stats } : {}),
        outputChunks: filter.outputChunks,
        observedTiming,
        finishedAt,
      });
    }),
  );
  return new Response(body, {
    status: pool.status,
    headers: {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      ...callIdentityHeaders(call),
    },
  });
}
