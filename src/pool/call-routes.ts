import { HTTPException } from "hono/http-exception";
import type { Clock } from "../core/clock.js";
import { openAIErrorResponse } from "../protocol/errors.js";
import { Header } from "../protocol/headers.js";
import { formatPoolLoad } from "../protocol/pool-status.js";
import { POOL_PATHS, type PoolPath } from "../protocol/signing.js";
import type { ClientLink } from "./client-link.js";
import type { CallAnswer } from "./direct-answer.js";
import type { PoolConfig } from "./config.js";
import type { Dispatcher } from "./dispatcher.js";
import type { PoolMetrics } from "./metrics.js";
import { ReplayGuard } from "./replay-guard.js";
import {
  CHAT_COMPLETIONS_SHAPE,
  COMPLETIONS_SHAPE,
  type CallVerifier,
  callVerifier,
  type ForwardedCall,
  MESSAGES_SHAPE,
  RESPONSES_SHAPE,
  type VerifyForwardedCallOptions,
} from "./verify-forward.js";

/*
 * The pool's model-calling routes, each API at its own path with one queue for all of
 * them, and what every route's checks and answers share. Two fronts serve them: Hono's
 * routes (app.ts: `app.request()` in tests, and any request the Node listener leaves to
 * Hono) and the pool's Node listener in front of Hono (call-listener.ts). Both use the
 * same verifiers, so a call ID one has seen is a replay to the other.
 */

export interface RouteChecksDeps {
  config: PoolConfig;
  metrics: PoolMetrics;
  clock: Clock;
}

/**
 * One route's signature checks: signature headers before the body, the body bounded as
 * it streams in (verify-forward.ts). `path` is the route's own, as the edge signed it;
 * each route is a replay set of its own, so a flood of one cannot fill another's.
 */
export function routeChecks(deps: RouteChecksDeps, path: PoolPath, maxBodyBytes: number): VerifyForwardedCallOptions {
  const { config, metrics, clock } = deps;
  return {
    keys: config.signingKeys,
    path,
    timestampWindowMs: config.timestampWindowMs,
    replay: new ReplayGuard(config.replayWindowMs, config.replayCapacity),
    clock,
    metrics,
    retryAfterSeconds: config.retryAfterSeconds,
    maxBodyBytes,
  };
}

/** The call routes by path (POOL_PATHS): what verifies a call to each. */
export type CallRoutes = ReadonlyMap<string, CallVerifier>;

export function callRoutes(deps: RouteChecksDeps): CallRoutes {
  const max = deps.config.maxBodyBytes;
  return new Map<string, CallVerifier>([
    [POOL_PATHS.chatCompletions, callVerifier(routeChecks(deps, POOL_PATHS.chatCompletions, max), CHAT_COMPLETIONS_SHAPE)],
    [POOL_PATHS.completions, callVerifier(routeChecks(deps, POOL_PATHS.completions, max), COMPLETIONS_SHAPE)],
    [POOL_PATHS.messages, callVerifier(routeChecks(deps, POOL_PATHS.messages, max), MESSAGES_SHAPE)],
    [POOL_PATHS.responses, callVerifier(routeChecks(deps, POOL_PATHS.responses, max), RESPONSES_SHAPE)],
  ]);
}

/** A verified call's answer, and the headers it carries besides its own: the pool's load then, for the edge's choice between pools. */
export async function answerCall(dispatcher: Dispatcher, forwarded: ForwardedCall, client: ClientLink): Promise<{ answer: CallAnswer; poolHeaders: Record<string, string> }> {
  const answer = await dispatcher.submit({ ...forwarded, client });
  return { answer, poolHeaders: poolHeadersOf(dispatcher) };
}

/** The headers every call's answer carries besides its own, as of now: the pool's load, for the edge's choice between pools. */
export function poolHeadersOf(dispatcher: Dispatcher): Record<string, string> {
  return { [Header.poolLoad]: formatPoolLoad(dispatcher.loadPerHealthyEngine()) };
}

/** `response` with the pool's headers added. */
export function withPoolHeaders(response: Response, poolHeaders: Readonly<Record<string, string>>): Response {
  /*
   * Set in place: the pool built the response, so its headers are mutable. A copy
   * would read `response.body`, which turns @hono/node-server's lightweight response
   * (written in one go) into a WHATWG Response and a stream. A response with immutable
   * headers (none today) is still copied.
   */
  try {
    for (const [name, value] of Object.entries(poolHeaders)) response.headers.set(name, value);
    return response;
  } catch {
    const headers = new Headers(response.headers);
    for (const [name, value] of Object.entries(poolHeaders)) headers.set(name, value);
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  }
}

/** The pool's answer to what a handler threw: a refusal's own (OpenAI-shaped) response, else a logged 500. */
export function poolErrorResponse(error: unknown): Response {
  if (error instanceof HTTPException) return error.getResponse();
  console.error("agentix pool: unhandled error", error);
  return openAIErrorResponse(500, "Internal pool error", { code: "internal_error" });
}
