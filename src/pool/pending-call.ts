import type { UnofficialStatusCode } from "hono/utils/http-status";
import type { ContextRef } from "../core/kv/retention-planner.js";
import type { ClientLink } from "./client-link.js";
import type { CallAnswer, DirectAnswer } from "./direct-answer.js";
import type { QueuedCall } from "../core/queue.js";
import { callErrorResponse } from "./call-errors.js";
import type { CallApi, CallForms } from "./engine-request.js";
import type { EngineTarget } from "./relay.js";
import type { KvLinkProfile } from "../sim/kv-links.js";

/*
 * A call while the pool holds it, and the engines it can be sent to: what the
 * dispatcher and the split-call flow (split-call.ts) share.
 */

export type CallStage = "queued" | "running" | "done";

export interface PendingCall {
  call: QueuedCall;
  /** The context its KV belongs to (program, thread, the edge's context generation). */
  context: ContextRef;
  forms: CallForms;
  stream: boolean;
  /** Whether its client is still there. */
  client: ClientLink;
  stage: CallStage;
  level: number;
  retriesLeft: number;
  failedEngines: Set<string>;
  /** The running attempt: its engine, and what aborts it (an AbortController, or the dispatcher's AttemptAbort). */
  attempt?: { engineId: string; controller: { abort(reason?: unknown): void } };
  /** Hands the call its answer: a Response, or an engine's answer the server may write straight (direct-answer.ts). */
  resolve(answer: CallAnswer): void;
  /** Writes an engine's answer straight to the client before it is resolved (CallSubmission.takeAnswer); absent: the caller writes what resolve() gives it. */
  takeAnswer?(answer: DirectAnswer): void;
  detach(): void;
}

export interface EngineSlot {
  target: EngineTarget;
  model: string | undefined;
  nativeApis: ReadonlySet<CallApi>;
  /** SGLang's bootstrap port of the engine as a prefill engine. */
  bootstrapPort: number;
  /** Its KV link as a prefill engine (from its profile), for a split call's expected transfer; undefined: unknown. */
  kvLink: KvLinkProfile | undefined;
}

/** Never read by anyone (the client is gone); 499 as nginx logs it. */
export function clientClosedResponse(callId: string): Response {
  return callErrorResponse(499 as UnofficialStatusCode, "Client closed the request", callId, { code: "client_closed" });
}

export function shuttingDownResponse(callId: string, headers: Record<string, string>): Response {
  return callErrorResponse(503, "The pool is shutting down", callId, { code: "shutting_down", headers });
}
