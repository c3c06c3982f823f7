import { createMiddleware } from "hono/factory";
import { OpenAIErrorBody } from "../../protocol/errors.js";
import { AnthropicHeader, Header } from "../../protocol/headers.js";
import { messagesErrorBody } from "../../protocol/messages.js";
import type { EdgeEnv } from "../context.js";

/**
 * Answers of the Messages API in Anthropic's conventions, whatever produced them
 * (auth, validation, quotas, the pool): an OpenAI-shaped error becomes Anthropic's
 * `{"type":"error","error":{type,message}}` with the same status and headers, and the
 * call's ID is also in `request-id`. Mount before tenant auth, so its refusals are
 * reshaped too.
 */
export function anthropicShape() {
  return createMiddleware<EdgeEnv>(async function anthropicShape(c, next) {
    await next();
    const requestId = c.res.headers.get(Header.requestId);
    if (requestId !== null) c.res.headers.set(AnthropicHeader.requestId, requestId);
    if (c.res.status < 400 || !(c.res.headers.get("content-type") ?? "").includes("application/json")) return;
    const body = OpenAIErrorBody.safeParse(await c.res.clone().json().catch(() => undefined));
    if (!body.success) return;
    const { status } = c.res;
    const headers = new Headers(c.res.headers);
    headers.delete("content-length");
    // Unset first: Hono would otherwise merge the old response's headers into the new one.
    c.res = undefined;
    c.res = new Response(JSON.stringify(messagesErrorBody(status, body.data)), { status, headers });
  });
}
