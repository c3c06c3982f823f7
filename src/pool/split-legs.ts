import type { CallTokens } from "../core/admission.js";
import { CALL_ERROR_MESSAGES, callErrorResponse } from "./call-errors.js";
import type { CallApi, EngineRequestForm } from "./engine-request.js";
import { clientClosedResponse, type PendingCall, shuttingDownResponse } from "./pending-call.js";
import type { RelayEnd, RelayStart } from "./relay.js";
import type { SplitCallHost } from "./split-call-host.js";

/*
 * What both kinds of split call (kv-transfer-split.ts, bootstrap-split.ts) do when a
 * leg ends or fails: slots back, work counted on the side that did it, a decode that
 * cannot go on recomputed whole, the call closed once.
 */

/** A split call goes as chat completions (or completions): the APIs whose requests carry kv_transfer_params and bootstrap fields. */
export const NO_NATIVE_APIS: ReadonlySet<CallApi> = new Set();

/** A decode's tokens as its engine ran them: the prompt arrived as KV, so it counts as cached (what the decode computed of it is small). */
export const handedOffTokens = (usage: CallTokens | undefined): CallTokens | undefined => (usage === undefined ? undefined : { ...usage, cachedTokens: usage.promptTokens });

export class SplitLegs {
  readonly #host: SplitCallHost;

  constructor(host: SplitCallHost) {
    this.#host = host;
  }

  /** A split call's prefill left its engine: the slot back, what it computed counted (its one token is not the call's output). */
  prefillEnded(pending: PendingCall, engineId: string, end: RelayEnd): void {
    const host = this.#host;
    host.release(pending, engineId, end.outcome, { serviceMs: end.serviceMs });
    // The engine's cells, as the dispatcher's whole calls count (metrics.ts EngineMeters).
    const meters = host.metrics.engine(engineId);
    meters.serviceSeconds.observe(end.wallMs / 1000);
    const usage = end.facts?.usage;
    if (usage !== undefined) meters.promptTokens[end.outcome].inc(usage.promptTokens);
    // Its first token is out when the prefill ends (a failed one is no longer backlog either); what it found cached prices the work it did.
    const completed = end.outcome === "completed";
    host.roleMeter?.prefillDone(pending.call.callId, completed ? host.clock.now() - pending.call.enqueuedAt : undefined, completed ? usage : undefined);
    host.noteRoleSwitches();
  }

  /** A split call's decode left its engine: the slot back, its output counted (its prompt was the prefill's). */
  decodeEnded(pending: PendingCall, engineId: string, end: RelayEnd): void {
    const { metrics, clock, core, roleMeter } = this.#host;
    const usage = end.facts?.usage;
    core.decodeEnded(
      pending.call.callId,
      { serviceMs: end.serviceMs, ...(end.outcome === "completed" && usage !== undefined ? { outputTokens: usage.completionTokens } : {}) },
      clock.now(),
    );
    const meters = metrics.engine(engineId);
    meters.calls[end.outcome].inc();
    meters.serviceSeconds.observe(end.wallMs / 1000);
    if (end.outcome === "completed") (usage ? meters.usageReported : meters.usageEstimated).inc();
    if (usage !== undefined) meters.completionTokens[end.outcome].inc(usage.completionTokens);
    if (usage !== undefined && usage.completionTokens > 0) {
      const context = usage.promptTokens + usage.completionTokens / 2;
      roleMeter?.decoded(usage.completionTokens, context, end.wallMs / usage.completionTokens);
    }
    if (end.outcome === "aborted" || end.outcome === "failed") {
      const work = usage === undefined ? "no usage reported" : `engine reported ${usage.completionTokens} completion tokens`;
      console.info(`agentix pool: call ${pending.call.callId} ${end.outcome} on decode engine ${engineId} after ${end.wallMs} ms; ${work}`);
    }
    this.#host.noteRoleSwitches();
  }

  /** The decode engine failed before its first byte: its slot back, the engine noted as failed for this call. */
  decodeRefused(pending: PendingCall, decodeId: string, start: Extract<RelayStart, { kind: "failed" }>): void {
    const host = this.#host;
    console.warn(`agentix pool: call ${pending.call.callId}: decode engine ${decodeId} failed before its first byte: ${start.reason}`);
    host.core.decodeEnded(pending.call.callId, { serviceMs: 0 }, host.clock.now());
    host.metrics.engine(decodeId).calls.engine_error.inc();
    host.metrics.splitHandoffs.inc({ outcome: "decode_failed" });
    pending.failedEngines.add(decodeId);
    if (start.connectionFailed) {
      host.core.engineDown(decodeId);
      host.engineDown(decodeId);
    }
    host.noteRoleSwitches();
  }

  /**
   * Nothing of a split call reached the client and its decode cannot go on: it is sent
   * again whole (counted as a retry), to a mixed engine, else a decode engine that
   * computes the prompt itself; with none free now it waits in the queue at its place
   * (and is split again). No retries left: it fails.
   */
  recompute(pending: PendingCall, engineId: string, reason: string): void {
    const host = this.#host;
    const callId = pending.call.callId;
    if (host.closed()) return host.finish(pending, shuttingDownResponse(callId, host.retryAfter()));
    if (pending.client.gone) return host.finish(pending, clientClosedResponse(callId));
    if (pending.retriesLeft <= 0) {
      console.error(`agentix pool: call ${callId}: its decode could not go on and no retries are left; last: ${reason}`);
      return host.finish(pending, callErrorResponse(502, CALL_ERROR_MESSAGES.engine_unavailable, callId, { code: "engine_unavailable" }));
    }
    pending.retriesLeft -= 1;
    host.metrics.retries.inc({ engine: engineId });
    const dispatch = host.core.routeRecompute(pending.call, pending.failedEngines);
    const slot = dispatch && host.slot(dispatch.engineId);
    if (dispatch && slot) {
      host.metrics.dispatches.inc({ engine: dispatch.engineId, reason: dispatch.reason });
      host.start(pending, dispatch.engineId, slot, host.clock.now());
      return;
    }
    host.requeue(pending);
  }

  /** The split call is over (its answer delivered, or given up): it leaves the pool once. */
  close(pending: PendingCall, end: RelayEnd | undefined): void {
    if (!this.#host.holds(pending.call.callId)) return;
    pending.stage = "done";
    this.#host.forget(pending, end);
    this.#host.pump();
  }

  /** An engine's answer to the client, in the call's API. */
  deliver(pending: PendingCall, engineId: string, response: Response, form: EngineRequestForm): void {
    const callId = pending.call.callId;
    if (form.answer === undefined) return pending.resolve(response);
    form.answer(response).then(pending.resolve, (error: unknown) => {
      console.error(`agentix pool: call ${callId}: the answer from engine ${engineId} could not be put in the call's API`, error);
      pending.resolve(callErrorResponse(502, CALL_ERROR_MESSAGES.engine_response_error, callId, { code: "engine_response_error" }));
    });
  }

  /** relayToEngine handles its own failures; this is a bug guard, not a path. */
  relayThrew(pending: PendingCall, engineId: string, error: unknown): void {
    const host = this.#host;
    console.error(`agentix pool: call ${pending.call.callId}: relay to engine ${engineId} threw`, error);
    host.core.decodeEnded(pending.call.callId, { serviceMs: 0 }, host.clock.now());
    if (pending.stage !== "done") host.release(pending, engineId, "failed", { serviceMs: 0 });
    host.finish(pending, callErrorResponse(500, CALL_ERROR_MESSAGES.internal_error, pending.call.callId, { code: "internal_error" }));
    host.pump();
  }
}
