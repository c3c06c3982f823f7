import type { MiddlewareHandler } from "hono";
import type { Clock } from "../core/clock.js";
import { ChatCompletionRequest } from "../protocol/chat.js";
import { invalidRequest, openAIError } from "../protocol/errors.js";
import type { ForwardFields } from "../protocol/forward.js";
import { verifyForward } from "../protocol/signing.js";
import type { PoolMetrics, RejectReason } from "./metrics.js";
import type { ReplayGuard } from "./replay-guard.js";

/** A call that passed verification: the edge's fields and the parsed body. */
export interface ForwardedCall {
  fields: ForwardFields;
  request: ChatCompletionRequest;
  /** The body as the edge sent it (zod's loose objects keep unknown fields), to forward. */
  body: Record<string, unknown>;
}

export type ForwardedEnv = { Variables: { forwarded: ForwardedCall } };

export interface VerifyForwardedCallOptions {
  secret: string;
  timestampWindowMs: number;
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
 * Admits only calls the edge signed: checks the HMAC over the exact body bytes, the
 * timestamp window and call-ID replay (all 401), then the body's shape (400). The
 * signature is checked first so unsigned traffic never touches the replay set.
 */
export function verifyForwardedCall(options: VerifyForwardedCallOptions): MiddlewareHandler<ForwardedEnv> {
  const { secret, timestampWindowMs, replay, clock, metrics } = options;
  const reject = (reason: RejectReason, status: 400 | 401 | 503, message: string, headers?: Record<string, string>) => {
    metrics.reject(reason);
    return openAIError(status, message, { code: reason, headers });
  };

  return async function verifyForwardedCallHandler(c, next) {
    const bytes = await c.req.arrayBuffer();
    const now = clock.now();
    const verified = await verifyForward(secret, c.req.raw.headers, bytes, { now, windowMs: timestampWindowMs });
    if (!verified.ok) {
      throw reject(signatureRejectReason(verified.reason), 401, `Unauthenticated pool call: ${verified.reason}`);
    }
    const seen = replay.check(verified.fields.call, now);
    if (seen === "replayed") throw reject("replayed_call", 401, "Unauthenticated pool call: call ID already seen");
    if (seen === "full") {
      throw reject("replay_cache_full", 503, "Pool is overloaded: too many recent calls", {
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
    const parsed = ChatCompletionRequest.safeParse(json);
    if (!parsed.success) {
      metrics.reject("invalid_request");
      throw invalidRequest(parsed.error);
    }
    c.set("forwarded", { fields: verified.fields, request: parsed.data, body: parsed.data });
    await next();
  };
}
