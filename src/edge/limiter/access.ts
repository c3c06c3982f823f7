import type { HTTPException } from "hono/http-exception";
import { openAIError } from "../../protocol/errors.js";
import { AnthropicHeader, RateLimitHeader } from "../../protocol/headers.js";
import type { Env } from "../env.js";
import { formatResetDuration, retryAfterSeconds } from "../limits/reset-duration.js";
import type { TenantLimiter } from "./tenant-limiter.js";
import type { LimiterSnapshot, Refusal } from "./types.js";

/** The tenant's limiter: one object per tenant ID (shard 0 of a sharded tenant: shards.ts). */
export function tenantLimiter(env: Env, tenantId: string): DurableObjectStub<TenantLimiter> {
  return env.TENANT_LIMITER.get(env.TENANT_LIMITER.idFromName(tenantId));
}

/** Shard `index` of the tenant's limiter: shard 0 is the tenant's one object, so a tenant made sharded keeps its state there. */
export function limiterShard(env: Pick<Env, "TENANT_LIMITER">, tenantId: string, index: number): DurableObjectStub<TenantLimiter> {
  const name = index === 0 ? tenantId : `${tenantId}#shard-${index}`;
  return env.TENANT_LIMITER.get(env.TENANT_LIMITER.idFromName(name));
}

/**
 * Whether any shard of the tenant's limiter admitted the call: shard 0, then (a tenant
 * ever sharded) every shard it ever had, since the granting shard is not recorded with
 * the program and N may have changed since.
 */
export async function admittedOnAnyShard(env: Pick<Env, "TENANT_LIMITER">, tenantId: string, callId: string): Promise<boolean> {
  const first = limiterShard(env, tenantId, 0);
  const [here, shards] = await Promise.all([first.wasAdmitted({ callId }), first.shardsEverUsed()]);
  if (here || shards <= 1) return here;
  const others = await Promise.all(Array.from({ length: shards - 1 }, (_, i) => limiterShard(env, tenantId, i + 1).wasAdmitted({ callId })));
  return others.some(Boolean);
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

/** The same figures under Anthropic's names; a reset is the time it happens (RFC 3339). */
export function anthropicRateLimitHeaders(snapshot: LimiterSnapshot, now: number): Record<string, string> {
  const at = (resetMs: number) => new Date(now + resetMs).toISOString();
  return {
    [AnthropicHeader.requestsLimit]: String(snapshot.requests.limit),
    [AnthropicHeader.requestsRemaining]: String(snapshot.requests.remaining),
    [AnthropicHeader.requestsReset]: at(snapshot.requests.resetMs),
    [AnthropicHeader.tokensLimit]: String(snapshot.tokens.limit),
    [AnthropicHeader.tokensRemaining]: String(snapshot.tokens.remaining),
    [AnthropicHeader.tokensReset]: at(snapshot.tokens.resetMs),
  };
}

const periodEnd = (snapshot: LimiterSnapshot) => new Date(snapshot.budget.periodEndMs).toISOString();

/** How a refusal is answered: 400 (the request itself cannot be served as sent) or 429 (later, or never this period). */
type Answer = { status: 400 | 429; message: string; code: string; quota: boolean };

function describe(refusal: Refusal, snapshot: LimiterSnapshot, param: string): Answer {
  const seconds = retryAfterSeconds(refusal.retryAfterMs);
  const prompt = refusal.promptTokens ?? 0;
  const fits = refusal.fits ?? 0;
  const fitsNow = fits >= 1 ? `${param} ≤ ${fits} fits now` : `no ${param} fits now`;
  switch (refusal.reason) {
    case "max_tokens_above_plan":
      return {
        status: 400,
        code: "max_tokens_above_plan_limit",
        quota: false,
        message: `${param} is ${refusal.requested ?? 0}, above your plan's maximum of ${refusal.limit} completion tokens. Lower ${param}.`,
      };
    case "max_tokens_exceeds_budget":
      return {
        status: 400,
        code: "max_tokens_exceeds_budget",
        quota: false,
        message:
          `${param} ${refusal.requested ?? 0} plus the prompt estimate ${prompt} exceeds what is left of the ` +
          `${snapshot.budget.period} token budget: ${refusal.available ?? 0} of ${refusal.limit} tokens` +
          ((refusal.held ?? 0) > 0 ? ` (${refusal.held} more held by calls in flight)` : "") +
          `. ${fits >= 1 ? `Set ${param} ≤ ${fits} (what fits now)` : `No ${param} fits until calls in flight finish`}; ` +
          `the budget resets at ${periodEnd(snapshot)}.`,
      };
    case "budget_held":
      return {
        status: 429,
        code: "budget_held_by_calls_in_flight",
        quota: false,
        message:
          `The ${snapshot.budget.period} token budget left (${refusal.available ?? 0} of ${refusal.limit} tokens) cannot hold this call ` +
          `(prompt estimate ${prompt} + ${param} ${refusal.requested ?? 0}) while calls in flight hold ${refusal.held ?? 0}: ` +
          `retry when they finish (they give back what they do not use), or lower ${param} (${fitsNow}).`,
      };
    case "budget_exhausted":
      return {
        status: 429,
        code: "budget_exhausted",
        quota: true,
        message:
          `Token budget exhausted for ${snapshot.budget.period}: limit ${refusal.limit}, available ${refusal.available ?? 0}, ` +
          `not enough for the prompt estimate (${prompt}) and one completion token. ` +
          `The budget resets at ${periodEnd(snapshot)}; upgrade the plan for more.`,
      };
    case "request_exceeds_tokens_per_minute":
      return {
        status: 429,
        code: "request_exceeds_tokens_per_minute",
        quota: false,
        message:
          `Request too large: it reserves ${refusal.requested ?? 0} tokens (prompt estimate + max tokens) ` +
          `but the limit is ${refusal.limit} tokens per minute. Lower max_tokens or shorten the prompt.`,
      };
    case "concurrency_limit":
      return {
        status: 429,
        code: "concurrency_limit_exceeded",
        quota: false,
        message: `Too many calls in flight: the limit is ${refusal.limit} at once. Retry when one finishes.`,
      };
    case "active_programs_limit":
      return {
        status: 429,
        code: "active_programs_limit_exceeded",
        quota: false,
        message:
          `Too many active programs: the limit is ${refusal.limit}. End one (DELETE /v1/programs/{id}) ` +
          `or continue an existing one with its x-agentix-program header.`,
      };
    case "requests_per_minute":
      return {
        status: 429,
        code: "rate_limit_exceeded",
        quota: false,
        message: `Rate limit reached for requests per minute: limit ${refusal.limit}. Retry in ${seconds}s.`,
      };
    case "tokens_per_minute":
      return {
        status: 429,
        code: "rate_limit_exceeded",
        quota: false,
        message:
          `Rate limit reached for tokens per minute: limit ${refusal.limit}, available ${refusal.available ?? 0}, ` +
          `requested ${refusal.requested ?? 0}. Retry in ${seconds}s.`,
      };
  }
}

/**
 * An admission refusal in OpenAI's shape with the x-ratelimit-* headers: 429 with
 * Retry-After for a limit, 400 invalid_request_error naming the completion-limit
 * field (`maxTokensParam`, default max_tokens) when the request's own limit is what
 * cannot be served (above the plan's maximum, or more than the budget has left).
 */
export function limitExceeded(refusal: Refusal, snapshot: LimiterSnapshot, maxTokensParam = "max_tokens"): HTTPException {
  const { status, message, code, quota } = describe(refusal, snapshot, maxTokensParam);
  if (status === 400) {
    return openAIError(400, message, { code, param: maxTokensParam, headers: rateLimitHeaders(snapshot) });
  }
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
