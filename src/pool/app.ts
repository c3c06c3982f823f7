import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { Clock } from "../core/clock.js";
import { openAIErrorResponse } from "../protocol/errors.js";
import type { PoolConfig } from "./config.js";
import type { Dispatcher } from "./dispatcher.js";
import type { PoolMetrics } from "./metrics.js";
import { ReplayGuard } from "./replay-guard.js";
import { type ForwardedEnv, verifyForwardedCall } from "./verify-forward.js";

export interface PoolAppDeps {
  config: PoolConfig;
  dispatcher: Dispatcher;
  metrics: PoolMetrics;
  clock: Clock;
}

/**
 * The pool's HTTP surface. `POST /v1/chat/completions` takes only calls the edge
 * signed. `GET /health` and `GET /metrics` are open: the pool listens on a private
 * network next to its engines. /health answers 503 when no engine is healthy, so a
 * balancer (or the edge) can steer away from a pool that cannot serve anything.
 */
export function createPoolApp(deps: PoolAppDeps): Hono<ForwardedEnv> {
  const { config, dispatcher, metrics, clock } = deps;
  const app = new Hono<ForwardedEnv>();

  app.onError((error) => {
    if (error instanceof HTTPException) return error.getResponse();
    return openAIErrorResponse(500, "Internal pool error", { code: "internal_error" });
  });
  app.notFound((c) => openAIErrorResponse(404, `No route for ${c.req.method} ${c.req.path}`, { code: "not_found" }));

  app.get("/health", (c) => {
    const engines = dispatcher.engineSnapshots();
    const ok = engines.some((engine) => engine.healthy);
    return c.json({ ok, queued: dispatcher.queuedCount, running: dispatcher.runningCount, engines }, ok ? 200 : 503);
  });

  app.get("/metrics", async (c) => {
    const text = await metrics.registry.metrics();
    return c.body(text, 200, { "content-type": metrics.registry.contentType });
  });

  app.post(
    "/v1/chat/completions",
    bodyLimit({
      maxSize: config.maxBodyBytes,
      onError: () => {
        metrics.reject("body_too_large");
        return openAIErrorResponse(413, `Request body exceeds ${config.maxBodyBytes} bytes`, { code: "body_too_large" });
      },
    }),
    verifyForwardedCall({
      secret: config.signingSecret,
      timestampWindowMs: config.timestampWindowMs,
      replay: new ReplayGuard(config.replayWindowMs, config.replayCapacity),
      clock,
      metrics,
      retryAfterSeconds: config.retryAfterSeconds,
    }),
    (c) => dispatcher.submit({ ...c.get("forwarded"), signal: c.req.raw.signal }),
  );

  return app;
}
