import { createMiddleware } from "hono/factory";
import type { EdgeEnv } from "../context.js";
import { anthropicRateLimitHeaders, rateLimitHeaders, tenantLimiter } from "../limiter/access.js";

/**
 * Puts OpenAI's x-ratelimit-* headers on every response of the route it
 * guards, errors included. A handler that consulted the limiter leaves its
 * figures in `c.var.rateLimit`; a request refused before that (a bad body)
 * costs one read-only look at the limiter. Mount after tenant auth. With
 * `anthropic`, Anthropic's anthropic-ratelimit-* too (what its clients read).
 */
export function rateLimitHeadersOnResponse(options: { anthropic?: boolean } = {}) {
  return createMiddleware<EdgeEnv>(async function rateLimitHeadersOnResponse(c, next) {
    await next();
    const tenant = c.get("tenant");
    if (!tenant) return;
    let snapshot = c.get("rateLimit");
    if (!snapshot) {
      try {
        snapshot = await tenantLimiter(c.env, tenant.id).peek({ now: Date.now(), limits: tenant.limits });
      } catch (error) {
        console.error("rate-limit headers: limiter unavailable", error);
        return;
      }
    }
    for (const [name, value] of Object.entries(rateLimitHeaders(snapshot))) c.res.headers.set(name, value);
    if (options.anthropic) {
      for (const [name, value] of Object.entries(anthropicRateLimitHeaders(snapshot, Date.now()))) c.res.headers.set(name, value);
    }
  });
}
