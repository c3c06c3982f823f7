import type { IncomingMessage, ServerResponse } from "node:http";
import type { Context, MiddlewareHandler } from "hono";
import type { z } from "zod";
import type { Clock } from "../core/clock.js";
import { ChatCompletionRequest } from "../protocol/chat.js";
import { CompletionRequest, completionSchedulingView } from "../protocol/completions.js";
import { CountTokensRequest, MessagesRequest } from "../protocol/messages.js";
import { estimatePromptTokens } from "../protocol/tokens.js";
import { messagesToChatRequest } from "../protocol/translate/messages-chat.js";
import { responseIdFor } from "../protocol/response-ids.js";
import { ResponsesRequest } from "../protocol/responses.js";
import { responsesToChatRequest } from "../protocol/translate/responses-chat.js";
import { messagesAnswerFromChat, responsesAnswerFromChat } from "../protocol/translate/answers.js";
import { invalidRequest, openAIError } from "../protocol/errors.js";
import type { ForwardFields } from "../protocol/forward.js";
import {
  parseSignedForwardHeaders,
  type PoolPath,
  SignatureProblem,
  type SigningKey,
  signingKeyById,
} from "../protocol/signing.js";
import { KvHintBatch } from "../protocol/kv-hints.js";
import { ToolEventBatch } from "../protocol/tool-events.js";
import { verifyForwardMacSync } from "./node-mac.js";
import { nodeSignedRequest, type SignedRequest, webSignedRequest } from "./signed-request.js";
import type { BoundedBody } from "./bounded-body.js";
import { CHAT_COMPLETIONS_PATH } from "./engines/adapter.js";
import { type CallApi, type CallForms, type EngineRequestForm } from "./engine-request.js";
import { nativeResponsesAnswer } from "./native-answers.js";
import type { PoolMetrics, RejectReason } from "./metrics.js";
import type { ReplayGuard } from "./replay-guard.js";

/** A call that passed verification: the edge's fields, the scheduling view and the forms an engine can be sent. */
export interface ForwardedCall {
  fields: ForwardFields;
  /** The call as the scheduler reads it (model, prompt, limit, stream), whatever its API. */
  request: ChatCompletionRequest;
  /** The body as the edge sent it (zod's loose objects keep unknown fields), in its API and, for Messages and Responses, as a chat completion. */
  forms: CallForms;
}

/**
 * One model-calling API at the pool: its request schema, the scheduling view of a
 * request (a chat completion), and the engine path that serves it natively.
 */
export interface CallApiShape<T extends z.ZodType<Record<string, unknown>>> {
  api: CallApi;
  schema: T;
  schedulingView(request: z.output<T>): ChatCompletionRequest;
  enginePath: string;
  /** The body an engine that serves the API natively gets (default: the request as the edge sent it). */
  nativeBody?: (request: z.output<T>) => Record<string, unknown>;
  /** What turns a native answer into the call's (default: nothing). */
  nativeAnswer?: (request: z.output<T>, fields: ForwardFields) => (answer: Response) => Promise<Response>;
  /**
   * For an API not every engine kind serves: the engine that does not gets the
   * scheduling view (a chat completion) and its answer is translated back.
   */
  answerFromChat?: (request: z.output<T>, fields: ForwardFields) => (answer: Response) => Promise<Response>;
}

/** Chat completions: the request is its own scheduling view. */
export const CHAT_COMPLETIONS_SHAPE: CallApiShape<typeof ChatCompletionRequest> = {
  api: "chat",
  schema: ChatCompletionRequest,
  schedulingView: (request) => request,
  enginePath: CHAT_COMPLETIONS_PATH,
};

/**
 * Anthropic's Messages API: as it came to an engine that serves it (vLLM, SGLang);
 * otherwise a chat completion, the answer translated back to Anthropic's shape.
 */
export const MESSAGES_SHAPE: CallApiShape<typeof MessagesRequest> = {
  api: "messages",
  schema: MessagesRequest,
  schedulingView: messagesToChatRequest,
  enginePath: "/v1/messages",
  answerFromChat: (request) => {
    const inputTokens = estimatePromptTokens(messagesToChatRequest(request));
    return (answer) => messagesAnswerFromChat(answer, inputTokens);
  },
};

/**
 * OpenAI's Responses API: as Messages, native or through chat. The edge has already
 * expanded previous_response_id into `input`, so an engine is told not to store
 * (`store: false`: the edge keeps the conversation); the response's ID names the
 * call's program and call (protocol/response-ids.ts), so a later previous_response_id
 * finds them, whichever form the engine got.
 */
export const RESPONSES_SHAPE: CallApiShape<typeof ResponsesRequest> = {
  api: "responses",
  schema: ResponsesRequest,
  schedulingView: (request) => responsesToChatRequest(request),
  enginePath: "/v1/responses",
  nativeBody: (request) => ({ ...request, store: false }),
  nativeAnswer: (request, fields) => (answer) => nativeResponsesAnswer(answer, responseIdFor(fields.program, fields.call), request.store !== false),
  answerFromChat: (request, fields) => (answer) => responsesAnswerFromChat(answer, request, responseIdFor(fields.program, fields.call)),
};

/** Legacy completions: vLLM, SGLang and OpenAI-compatible servers all serve it. */
export const COMPLETIONS_SHAPE: CallApiShape<typeof CompletionRequest> = {
  api: "completions",
  schema: CompletionRequest,
  schedulingView: completionSchedulingView,
  enginePath: "/v1/completions",
};

/** The forms of a verified call of `shape`'s API. */
function callForms<T extends z.ZodType<Record<string, unknown>>>(shape: CallApiShape<T>, data: z.output<T>, request: ChatCompletionRequest, fields: ForwardFields): CallForms {
  const native: EngineRequestForm = { api: shape.api, path: shape.enginePath, body: shape.nativeBody?.(data) ?? data };
  if (shape.nativeAnswer) native.answer = shape.nativeAnswer(data, fields);
  if (shape.answerFromChat === undefined) return { native };
  return { native, viaChat: { api: "chat", path: CHAT_COMPLETIONS_PATH, body: request, answer: shape.answerFromChat(data, fields) } };
}

/** A batch of tool events that passed verification; `fields.call` is the batch's ID. */
export interface ForwardedToolEvents {
  fields: ForwardFields;
  batch: ToolEventBatch;
}

/** A count_tokens request that passed verification; `fields.call` is the request's ID. */
export interface ForwardedTokenCount {
  fields: ForwardFields;
  request: CountTokensRequest;
}

/** A batch of KV hints that passed verification; `fields.program` is the program they are about, `fields.call` the batch's ID. */
export interface ForwardedKvHints {
  fields: ForwardFields;
  batch: KvHintBatch;
}

export type ForwardedEnv = {
  /** @hono/node-server's Node request and response; absent under Hono's `app.request()` (tests). */
  Bindings: { incoming?: IncomingMessage; outgoing?: ServerResponse };
  Variables: { forwarded: ForwardedCall; toolEvents: ForwardedToolEvents; tokenCount: ForwardedTokenCount; kvHints: ForwardedKvHints };
};

export interface VerifyForwardedCallOptions {
  /** The keys the pool accepts (two while a secret rotates); the signature names one by its ID. */
  keys: readonly SigningKey[];
  /**
   * The API path of the route this middleware guards, as the edge signed it: a
   * constant, not the request's URL, so a reverse proxy's path prefix changes nothing.
   */
  path: PoolPath;
  timestampWindowMs: number;
  /** Call IDs (or event batch IDs) seen within the replay window. */
  replay: ReplayGuard;
  clock: Clock;
  metrics: PoolMetrics;
  retryAfterSeconds: number;
  /** Largest body read (bytes); a larger one is refused with 413 as soon as it passes this. */
  maxBodyBytes: number;
}

/** A body that is not UTF-8 is not JSON. One decoder for all (decode() without `stream` keeps no state between calls). */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });

/** A refusal, counted by reason. */
function refusal(metrics: PoolMetrics, reason: RejectReason, status: 400 | 401 | 413 | 503, message: string, headers?: Record<string, string>) {
  metrics.reject(reason);
  return openAIError(status, message, { code: reason, headers });
}

function signatureRejectReason(reason: string): RejectReason {
  if (reason === SignatureProblem.missingSignature || reason === SignatureProblem.missingKeyId) return "missing_signature";
  return "invalid_signature";
}

/**
 * In this order, so that nothing the edge did not sign costs more than its headers:
 *
 * 1. before any body byte is read: the signature header is present, v2 and well
 *    formed, it names a key the pool holds, every field parses, and the timestamp
 *    is within the window (401);
 * 2. the body, counted as it arrives: 413 at the chunk that passes maxBodyBytes,
 *    then hashed whole;
 * 3. the HMAC over the method, the route's path, the key ID, the fields and that
 *    hash (401);
 * 4. only then the call ID against the replay set (401, or 503 when the set is
 *    full), so unsigned traffic never touches it;
 * (5. in verifySigned: the body's JSON against `schema`, 400.)
 *
 * What: "call", "event batch" or "status request", for messages.
 */
function verifySignedRequest(
  request: SignedRequest,
  options: VerifyForwardedCallOptions,
  what: string,
): Promise<{ fields: ForwardFields; bytes: Uint8Array }> {
  return verifiedWith(request, options, what, signedBody);
}

/** What a signed request's checks hand on: its fields and its body's bytes. */
const signedBody = (fields: ForwardFields, bytes: Uint8Array): { fields: ForwardFields; bytes: Uint8Array } => ({ fields, bytes });

/**
 * Steps 1-4 of verifySignedRequest, then `finish` with the fields and the body, all in the
 * body's one promise hop: the checks are synchronous but for the body's arrival (a chain
 * of async functions took a promise and a hop per level between the body's end and the
 * call's queueing). A refusal rejects.
 */
function verifiedWith<T>(
  request: SignedRequest,
  options: VerifyForwardedCallOptions,
  what: string,
  finish: (fields: ForwardFields, bytes: Uint8Array) => T,
): Promise<T> {
  let head: SignedHead;
  try {
    head = signedHead(request, options, what);
  } catch (error) {
    return Promise.reject(error);
  }
  return request.readBody(options.maxBodyBytes).then((body) => finish(head.signed.fields, verifiedBody(request, options, what, head, body)));
}

interface SignedHead {
  signed: Extract<ReturnType<typeof parseSignedForwardHeaders>, { ok: true }>;
  key: SigningKey;
}

/** Step 1: the signature headers, the key and the timestamp, before any body byte is read (throws the refusal). */
function signedHead(request: SignedRequest, options: VerifyForwardedCallOptions, what: string): SignedHead {
  const { keys, timestampWindowMs, clock, metrics } = options;
  const signed = parseSignedForwardHeaders(request.headers);
  if (!signed.ok) throw refusal(metrics, signatureRejectReason(signed.reason), 401, `Unauthenticated pool ${what}: ${signed.reason}`);
  const key = signingKeyById(keys, signed.keyId);
  if (!key) {
    throw refusal(metrics, "unknown_signing_key", 401, `Unauthenticated pool ${what}: signed with key ${signed.keyId}, which this pool does not hold`);
  }
  if (Math.abs(clock.now() - signed.fields.ts) > timestampWindowMs) {
    throw refusal(metrics, "stale_timestamp", 401, `Unauthenticated pool ${what}: stale timestamp`);
  }
  return { signed, key };
}

/** Steps 2-4 once the body is in: its size, the HMAC, the replay set; the body's bytes (throws the refusal). */
function verifiedBody(request: SignedRequest, options: VerifyForwardedCallOptions, what: string, head: SignedHead, body: BoundedBody): Uint8Array {
  const { path, replay, clock, metrics, maxBodyBytes } = options;
  const { signed, key } = head;
  if (!body.ok) throw refusal(metrics, "body_too_large", 413, `Request body exceeds ${maxBodyBytes} bytes`);
  if (!verifyForwardMacSync(key, { method: request.method, path }, signed.fields, signed.mac, body.sha256Hex)) {
    throw refusal(metrics, "invalid_signature", 401, `Unauthenticated pool ${what}: bad signature`);
  }
  const seen = replay.check(signed.fields.call, clock.now());
  if (seen === "replayed") throw refusal(metrics, "replayed_call", 401, `Unauthenticated pool ${what}: ${what} ID already seen`);
  if (seen === "full") {
    throw refusal(metrics, "replay_cache_full", 503, `Pool is overloaded: too many recent ${what}s`, {
      "Retry-After": String(options.retryAfterSeconds),
    });
  }
  return body.bytes;
}

/** Step 5: the body's JSON against `schema` (400). */
function parsedBody<T extends z.ZodType>(bytes: Uint8Array, schema: T, metrics: PoolMetrics): z.output<T> {
  let json: unknown;
  try {
    json = JSON.parse(STRICT_UTF8.decode(bytes));
  } catch {
    metrics.reject("invalid_request");
    throw openAIError(400, "Invalid request: body is not valid JSON", { code: "invalid_json" });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    metrics.reject("invalid_request");
    throw invalidRequest(parsed.error);
  }
  return parsed.data;
}

/** Steps 1-4 of verifySignedRequest, then 5: the body's JSON against `schema` (400). */
function verifySigned<T extends z.ZodType>(
  request: SignedRequest,
  options: VerifyForwardedCallOptions,
  schema: T,
  what: string,
): Promise<{ fields: ForwardFields; data: z.output<T> }> {
  return verifiedWith(request, options, what, (fields, bytes) => ({ fields, data: parsedBody(bytes, schema, options.metrics) }));
}

/** The request as the checks read it: from Node's message behind the pool's server, else from the Web Request. */
function signedRequestOf(c: Context<ForwardedEnv>): SignedRequest {
  const incoming = c.env?.incoming;
  return incoming === undefined ? webSignedRequest(c.req.raw) : nodeSignedRequest(incoming);
}

/** Verifies a call to one call route; rejects with the refusal (an OpenAI-shaped HTTPException). */
export type CallVerifier = (request: SignedRequest) => Promise<ForwardedCall>;

/** Admits only calls the edge signed (see verifySigned), of the API `shape` describes. */
export function callVerifier<T extends z.ZodType<Record<string, unknown>>>(options: VerifyForwardedCallOptions, shape: CallApiShape<T>): CallVerifier {
  const { metrics } = options;
  return function verifyForwardedCall(signed) {
    return verifiedWith(signed, options, "call", (fields, bytes) => {
      const data = parsedBody(bytes, shape.schema, metrics);
      const request = shape.schedulingView(data);
      return { fields, request, forms: callForms(shape, data, request, fields) };
    });
  };
}

/** The same as Hono middleware, for `app.request()` and any call route the pool's Node listener leaves to Hono (call-listener.ts). */
export function verifyForwardedCall(verify: CallVerifier): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedCallHandler(c, next) {
    c.set("forwarded", await verify(signedRequestOf(c)));
    await next();
  };
}

/** Admits only count_tokens requests the edge signed, verified exactly like calls (see verifySigned). */
export function verifyForwardedTokenCount(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedTokenCountHandler(c, next) {
    const { fields, data } = await verifySigned(signedRequestOf(c), options, CountTokensRequest, "token count");
    c.set("tokenCount", { fields, request: data });
    await next();
  };
}

/** Admits only tool-event batches the edge signed, verified exactly like calls (see verifySigned). */
export function verifyForwardedToolEvents(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedToolEventsHandler(c, next) {
    const { fields, data } = await verifySigned(signedRequestOf(c), options, ToolEventBatch, "event batch");
    c.set("toolEvents", { fields, batch: data });
    await next();
  };
}

/** Admits only KV-hint batches the edge signed, verified exactly like calls (see verifySigned). */
export function verifyForwardedKvHints(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedKvHintsHandler(c, next) {
    const { fields, data } = await verifySigned(signedRequestOf(c), options, KvHintBatch, "KV hint batch");
    c.set("kvHints", { fields, batch: data });
    await next();
  };
}

/**
 * Admits only status requests the edge signed: a GET with an empty body, verified
 * like calls (the signed fields name the edge's probe; `call` is its unique ID).
 */
export function verifyStatusRequest(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyStatusRequestHandler(c, next) {
    await verifySignedRequest(signedRequestOf(c), { ...options, maxBodyBytes: 0 }, "status request");
    await next();
  };
}
