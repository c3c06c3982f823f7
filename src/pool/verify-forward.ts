import type { Context, MiddlewareHandler } from "hono";
import type { z } from "zod";
import type { Clock } from "../core/clock.js";
import { ChatCompletionRequest } from "../protocol/chat.js";
import { invalidRequest, openAIError } from "../protocol/errors.js";
import type { ForwardFields } from "../protocol/forward.js";
import { verifyForward } from "../protocol/signing.js";
import { ToolEventBatch } from "../protocol/tool-events.js";
import type { PoolMetrics, RejectReason } from "./metrics.js";
import type { ReplayGuard } from "./replay-guard.js";

/** A call that passed verification: the edge's fields and the parsed body. */
export interface ForwardedCall {
  fields: ForwardFields;
  request: ChatCompletionRequest;
  /** The body as the edge sent it (zod's loose objects keep unknown fields), to forward. */
  body: Record<string, unknown>;
}

/** A batch of tool events that passed verification; `fields.call` is the batch's ID. */
export interface ForwardedToolEvents {
  fields: ForwardFields;
  batch: ToolEventBatch;
}

export type ForwardedEnv = { Variables: { forwarded: ForwardedCall; toolEvents: ForwardedToolEvents } };

export interface VerifyForwardedCallOptions {
  secret: string;
  timestampWindowMs: number;
  /** Call IDs (or event batch IDs) seen within the replay window. */
  replay: ReplayGuard;
  clock: Clock;
  metrics: PoolMetrics;
  retryAfterSeconds: number;
}

function signatureRejectReason(reason: string): RejectReason {
  if (reason === "missing signature") return "missing_signature";
  if (reason === "stale timestamp") return "stale_timestamp";
  return "invalid_signature";
}

/**
 * Checks the HMAC over the exact body bytes, the timestamp window and ID replay (all
 * 401), then the body's JSON against `schema` (400). The signature is checked first
 * so unsigned traffic never touches the replay set. What: "call" or "event batch", for messages.
 */
async function verifySigned<T extends z.ZodType>(
  c: Context<ForwardedEnv>,
  options: VerifyForwardedCallOptions,
  schema: T,
  what: string,
): Promise<{ fields: ForwardFields; data: z.output<T> }> {
  const { secret, timestampWindowMs, replay, clock, metrics } = options;
  const reject = (reason: RejectReason, status: 400 | 401 | 503, message: string, headers?: Record<string, string>) => {
    metrics.reject(reason);
    return openAIError(status, message, { code: reason, headers });
  };
  const bytes = await c.req.arrayBuffer();
  const now = clock.now();
  const verified = await verifyForward(secret, c.req.raw.headers, bytes, { now, windowMs: timestampWindowMs });
  if (!verified.ok) {
    throw reject(signatureRejectReason(verified.reason), 401, `Unauthenticated pool ${what}: ${verified.reason}`);
  }
  const seen = replay.check(verified.fields.call, now);
  if (seen === "replayed") throw reject("replayed_call", 401, `Unauthenticated pool ${what}: ${what} ID already seen`);
  if (seen === "full") {
    throw reject("replay_cache_full", 503, `Pool is overloaded: too many recent ${what}s`, {
      "Retry-After": String(options.retryAfterSeconds),
    });
  }

  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    metrics.reject("invalid_request");
    throw openAIError(400, "Invalid request: body is not valid JSON", { code: "invalid_json" });
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) {
    metrics.reject("invalid_request");
    throw invalidRequest(parsed.error);
  }
  return { fields: verified.fields, data: parsed.data };
}

/** Admits only calls the edge signed (see verifySigned). */
export function verifyForwardedCall(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedCallHandler(c, next) {
    const { fields, data } = await verifySigned(c, options, ChatCompletionRequest, "call");
    c.set("forwarded", { fields, request: data, body: data });
    await next();
  };
}

/** Admits only tool-event batches the edge signed, verified exactly like calls (see verifySigned). */
export function verifyForwardedToolEvents(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  return async function verifyForwardedToolEventsHandler(c, next) {
    const { fields, data } = await verifySigned(c, options, ToolEventBatch, "event batch");
    c.set("toolEvents", { fields, batch: data });
    await next();
  };
}
