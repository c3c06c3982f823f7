import type { HTTPException } from "hono/http-exception";
import { openAIError } from "../../protocol/errors.js";
import { RateLimitHeader } from "../../protocol/headers.js";
import type { Env } from "../env.js";
import { formatResetDuration, retryAfterSeconds } from "../limits/reset-duration.js";
import type { TenantLimiter } from "./tenant-limiter.js";
import type { LimiterSnapshot, Refusal } from "./types.js";

/** The tenant's limiter: one object per tenant ID. */
export function tenantLimiter(env: Env, tenantId: string): DurableObjectStub<TenantLimiter> {
  return env.TENANT_LIMITER.get(env.TENANT_LIMITER.idFromName(tenantId));
}

/** OpenAI's x-ratelimit-* headers for a snapshot. */
export function rateLimitHeaders(snapshot: LimiterSnapshot): Record<string, string> {
  return {
    [RateLimitHeader.limitRequests]: String(snapshot.requests.limit),
    [RateLimitHeader.remainingRequests]: String(snapshot.requests.remaining),
    [RateLimitHeader.resetRequests]: formatResetDuration(snapshot.requests.resetMs),
    [RateLimitHeader.limitTokens]: String(snapshot.tokens.limit),
    [RateLimitHeader.remainingTokens]: String(snapshot.tokens.remaining),
    [RateLimitHeader.resetTokens]: formatResetDuration(snapshot.tokens.resetMs),
  };
}

const periodEnd = (snapshot: LimiterSnapshot) => new Date(snapshot.budget.periodEndMs).toISOString();

function describe(refusal: Refusal, snapshot: LimiterSnapshot): { message: string; code: string; quota: boolean } {
  const seconds = retryAfterSeconds(refusal.retryAfterMs);
  switch (refusal.reason) {
    case "budget_exhausted":
      return {
        code: "budget_exhausted",
        quota: true,
        message:
          `Token budget exhausted for ${snapshot.budget.period}: limit ${refusal.limit}, available ${refusal.available ?? 0}, ` +
          `this call reserves ${refusal.requested ?? 0} (prompt estimate + max tokens). ` +
          `The budget resets at ${periodEnd(snapshot)}; lower max_tokens or upgrade the plan.`,
      };
    case "request_exceeds_tokens_per_minute":
      return {
        code: "request_exceeds_tokens_per_minute",
        quota: false,
        message:
          `Request too large: it reserves ${refusal.requested ?? 0} tokens (prompt estimate + max tokens) ` +
          `but the limit is ${refusal.limit} tokens per minute. Lower max_tokens or shorten the prompt.`,
      };
    case "concurrency_limit":
      return {
        code: "concurrency_limit_exceeded",
        quota: false,
        message: `Too many calls in flight: the limit is ${refusal.limit} at once. Retry when one finishes.`,
      };
    case "active_programs_limit":
      return {
        code: "active_programs_limit_exceeded",
        quota: false,
        message:
          `Too many active programs: the limit is ${refusal.limit}. End one (DELETE /v1/programs/{id}) ` +
          `or continue an existing one with its x-agentix-program header.`,
      };
    case "requests_per_minute":
      return {
        code: "rate_limit_exceeded",
        quota: false,
        message: `Rate limit reached for requests per minute: limit ${refusal.limit}. Retry in ${seconds}s.`,
      };
    case "tokens_per_minute":
      return {
        code: "rate_limit_exceeded",
        quota: false,
        message:
          `Rate limit reached for tokens per minute: limit ${refusal.limit}, available ${refusal.available ?? 0}, ` +
          `requested ${refusal.requested ?? 0}. Retry in ${seconds}s.`,
      };
  }
}

/** A 429 in OpenAI's shape with Retry-After and the x-ratelimit-* headers. */
export function limitExceeded(refusal: Refusal, snapshot: LimiterSnapshot): HTTPException {
  const { message, code, quota } = describe(refusal, snapshot);
  return openAIError(429, message, {
    type: quota ? "insufficient_quota" : "rate_limit_error",
    code,
    headers: {
      ...rateLimitHeaders(snapshot),
      [RateLimitHeader.retryAfter]: String(retryAfterSeconds(refusal.retryAfterMs)),
    },
  });
}

/** A caller bug: the limiter refused the input's shape. */
export function limiterMisuse(detail: string): HTTPException {
  console.error(`TenantLimiter refused its input: ${detail}`);
  return openAIError(500, "Internal error: the rate limiter refused the call's bookkeeping.", { code: "internal_error" });
}
