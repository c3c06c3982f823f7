import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import { Hono, type MiddlewareHandler } from "hono";
import { z } from "zod";
import type { Clock } from "../core/clock.js";
import { openAIError, openAIErrorResponse } from "../protocol/errors.js";
import { PROGRAM_ID } from "../protocol/ids.js";
import { POOL_PATHS } from "../protocol/signing.js";
import type { PoolStatus } from "../protocol/pool-status.js";
import { Header } from "../protocol/headers.js";
import type { KvHintsAccepted } from "../protocol/kv-hints.js";
import type { ToolEventsAccepted } from "../protocol/tool-events.js";
import type { CountTokensResponse } from "../protocol/messages.js";
import type { PoolConfig } from "./config.js";
import type { Dispatcher } from "./dispatcher.js";
import type { PoolMetrics } from "./metrics.js";
import { operatorAccess } from "./operator-auth.js";
import { answerResponse, DirectAnswer } from "./direct-answer.js";
import { answerCall, type CallRoutes, callRoutes, poolErrorResponse, routeChecks, withPoolHeaders } from "./call-routes.js";
import { nodeClientLink, signalClientLink } from "./client-link.js";
import {
  type ForwardedEnv,
  verifyForwardedCall,
  verifyForwardedKvHints,
  verifyForwardedTokenCount,
  verifyForwardedToolEvents,
  verifyStatusRequest,
} from "./verify-forward.js";

/** A forwarded event batch is at most 64 small events; this bounds what is read before the MAC is checked. */
const MAX_EVENT_BODY_BYTES = 4 * 1024 * 1024;
/** A KV-hint batch is at most 16 hints of a few dozen bytes. */
const MAX_KV_HINTS_BODY_BYTES = 64 * 1024;

export interface PoolAppDeps {
  config: PoolConfig;
  dispatcher: Dispatcher;
  metrics: PoolMetrics;
  clock: Clock;
  /** The call routes' verifiers, when the pool's Node listener shares them (server.ts); default: the app's own. */
  calls?: CallRoutes;
}

/** What /health tells anyone (a load balancer): "ok" (200) while an engine is healthy, else "degraded" (503). */
export const PoolHealthStatus = z.strictObject({ status: z.enum(["ok", "degraded"]) });
export type PoolHealthStatus = z.infer<typeof PoolHealthStatus>;

/**
 * The pool's HTTP surface. `POST /v1/chat/completions` takes only calls the edge
 * signed, `POST /v1/events` only tool-event batches it signed, `GET /v1/status` (the
 * pool's load, health and models, for the edge's pool choice) only status requests it
 * signed, `POST /v1/kv-hints` (a program or one of its threads ended: its KV may go first) only hint batches it
 * signed (same checks; each a replay set of its own, so a flood of one cannot fill
 * another's).
 *
 * Operator endpoints need `Authorization: Bearer <operatorToken>`: `GET /metrics`,
 * `GET /roles` (each engine's prefill/decode/mixed role, the one it drains toward, the controller),
 * `GET /tao/*` (`/tao/programs/{id}`: what the readiness predictor, the
 * cache-credit ledger and the KV retention planner know about a program), and the detail of `GET /health` (queue,
 * engines). Without the token /health says only `{"status":"ok"|"degraded"}`, with
 * 503 when no engine is healthy, so a balancer (or the edge) can steer away from a
 * pool that cannot serve anything.
 */
export function createPoolApp(deps: PoolAppDeps): Hono<ForwardedEnv> {
  const { config, dispatcher, metrics, clock } = deps;
  const app = new Hono<ForwardedEnv>();
  app.onError(poolErrorResponse);
  app.notFound((c) => openAIErrorResponse(404, `No route for ${c.req.method} ${c.req.path}`, { code: "not_found" }));

  /*
   * A pool without an operator token has no operators: its operator endpoints answer
   * 403, not 404. Hiding them would protect nothing (the routes are the same in every
   * pool, the code is public), and 403 with its reason tells the operator who scrapes
   * an unconfigured pool what to set, where a 404 would look like a wrong URL. Not 401:
   * no credential can succeed.
   */
  const requireOperator: MiddlewareHandler<ForwardedEnv> = async (c, next) => {
    const access = operatorAccess(config.operatorToken, c.req.header("authorization"));
    if (access === "disabled") {
      throw openAIError(403, "Operator endpoints are disabled on this pool: set operatorToken (or AGENTIX_POOL_OPERATOR_TOKEN)", {
        code: "operator_endpoints_disabled",
      });
    }
    if (access === "denied") {
      throw openAIError(401, "This endpoint needs the pool's operator token (Authorization: Bearer …)", {
        code: "invalid_operator_token",
        headers: { "WWW-Authenticate": 'Bearer realm="agentix-pool"' },
      });
    }
    await next();
  };

  app.get("/health", (c) => {
    const engines = dispatcher.engineSnapshots();
    const ok = engines.some((engine) => engine.healthy);
    const status: PoolHealthStatus = { status: ok ? "ok" : "degraded" };
    if (operatorAccess(config.operatorToken, c.req.header("authorization")) !== "granted") return c.json(status, ok ? 200 : 503);
    return c.json({ ...status, ok, queued: dispatcher.queuedCount, running: dispatcher.runningCount, engines }, ok ? 200 : 503);
  });

  app.use("/tao/*", requireOperator);

  app.get("/metrics", requireOperator, async (c) => {
    const text = await metrics.registry.metrics();
    return c.body(text, 200, { "content-type": metrics.registry.contentType });
  });

  app.get("/roles", requireOperator, (c) =>
    c.json({
      controller: config.roles.controller,
      engines: dispatcher.engineRoles().map((engine) => ({
        id: engine.id,
        role: engine.role,
        switching_to: engine.switchingTo ?? null,
        finishing_from: engine.finishingFrom ?? null,
        switch_mode: engine.switchMode,
        in_flight: engine.inFlight,
      })),
    }),
  );

  app.get("/tao/programs/:programId", (c) => {
    const programId = c.req.param("programId");
    if (!PROGRAM_ID.test(programId)) throw openAIError(400, `Invalid program ID: ${programId.slice(0, 80)}`, { code: "invalid_program_id", param: "program_id" });
    const program = dispatcher.inspectProgram(programId);
    if (program === undefined) throw openAIError(404, `The pool knows nothing of program ${programId}.`, { code: "program_not_found" });
    return c.json({
      program_id: program.programId,
      placement: program.placement,
      live_calls: program.live,
      context_tokens: program.contextTokens,
      readiness: {
        status: program.readiness.status,
        ready_at: program.readiness.readyAt ?? null,
        source: program.readiness.source ?? null,
        made_at: program.readiness.madeAt ?? null,
      },
      cache_credit_tokens: program.credits,
      // The retention planner's view: each thread's current context, where it is held, and a keep in force.
      kv_contexts: program.kvContexts.map((context) => ({
        thread: context.threadId,
        generation: context.generation,
        engines: context.engines,
        kept_until: context.keptUntil ?? null,
      })),
    });
  });

  app.get(POOL_PATHS.status, verifyStatusRequest(routeChecks(deps, POOL_PATHS.status, 0)), (c) => {
    const status: PoolStatus = dispatcher.status();
    return c.json(status);
  });

  app.post(
    POOL_PATHS.toolEvents,
    verifyForwardedToolEvents(routeChecks(deps, POOL_PATHS.toolEvents, Math.min(config.maxBodyBytes, MAX_EVENT_BODY_BYTES))),
    (c) => {
      const { fields, batch } = c.get("toolEvents");
      const accepted: ToolEventsAccepted = { accepted: dispatcher.toolEvents(fields.program, batch.events, fields.ts) };
      return c.json(accepted, 202);
    },
  );

  app.post(
    POOL_PATHS.kvHints,
    verifyForwardedKvHints(routeChecks(deps, POOL_PATHS.kvHints, Math.min(config.maxBodyBytes, MAX_KV_HINTS_BODY_BYTES))),
    (c) => {
      const { fields, batch } = c.get("kvHints");
      const accepted: KvHintsAccepted = { accepted: dispatcher.kvHints(fields.program, batch.hints) };
      return c.json(accepted, 202);
    },
  );

  app.post(POOL_PATHS.countTokens, verifyForwardedTokenCount(routeChecks(deps, POOL_PATHS.countTokens, config.maxBodyBytes)), async (c) => {
    const { fields, request } = c.get("tokenCount");
    const counted = await dispatcher.countTokens(request);
    if (!counted.ok) {
      console.warn(`agentix pool: count_tokens ${fields.call}: ${counted.reason}`);
      throw openAIError(501, "No engine of this pool counts tokens now", { code: "token_count_unavailable" });
    }
    const answer: CountTokensResponse = { input_tokens: counted.inputTokens };
    return c.json(answer, 200, { [Header.engine]: counted.engine });
  });

  // Each model-calling API at its own path (call-routes.ts); one queue for all of them.
  for (const [path, verify] of deps.calls ?? callRoutes(deps)) {
    app.post(path, verifyForwardedCall(verify), async (c) => {
      const { incoming, outgoing } = c.env ?? {};
      const client = incoming !== undefined && outgoing !== undefined ? nodeClientLink(incoming, outgoing) : signalClientLink(c.req.raw.signal);
      const { answer, poolHeaders } = await answerCall(dispatcher, c.get("forwarded"), client);
      // An engine's answer goes straight to Node's response (direct-answer.ts); under app.request() there is none.
      if (outgoing !== undefined && answer instanceof DirectAnswer) {
        answer.write(outgoing, poolHeaders);
        return RESPONSE_ALREADY_SENT;
      }
      return withPoolHeaders(answerResponse(answer), poolHeaders);
    });
  }

  return app;
}
