import { attemptSignalOf } from "./attempt-abort.js";
import { handoffOf, type KvTransferParams } from "../protocol/kv-transfer.js";
import type { CallUsage } from "./call-facts.js";
import { type EngineRequestForm, formFor } from "./engine-request.js";
import { vllmDecodeBody, vllmPrefillBody } from "./engines/split.js";
import { clientClosedResponse, type EngineSlot, type PendingCall, shuttingDownResponse } from "./pending-call.js";
import { type RelayEnd, relayToEngine } from "./relay.js";
import type { SplitCallHost } from "./split-call-host.js";
import { handedOffTokens, NO_NATIVE_APIS, type SplitLegs } from "./split-legs.js";
import { billPromptFromPrefill } from "./split-usage.js";
import { ReleasingMap } from "../core/releasing-map.js";

/*
 * vLLM's two steps (engines/split.ts): the prefill engine computes the prompt
 * (max_tokens 1, not streamed) and answers where its KV is; then the decode engine is
 * sent the call with that handoff and its answer is the client's. A prefill that fails
 * before its first byte is retried as any attempt; a 4xx is the request's and goes to
 * the client.
 */

export class KvTransferSplit {
  readonly #host: SplitCallHost;
  readonly #legs: SplitLegs;

  /** Prefilled calls whose decode no decode engine admits yet (core admitDecode), oldest first. */
  readonly #held = new ReleasingMap<string, { since: number; pending: PendingCall; retry: () => void }>();

  constructor(host: SplitCallHost, legs: SplitLegs) {
    this.#host = host;
    this.#legs = legs;
  }

  /** Asks again for every held decode (capacity may have appeared, the pool may be closing, a client gone). */
  retryHeld(): void {
    for (const [callId, held] of [...this.#held]) if (this.#held.get(callId) === held) held.retry();
  }

  get heldCount(): number {
    return this.#held.size;
  }

  /**
   * The client of a held call left: it leaves the held list and the pool now, not at the
   * next pump (it holds no engine slot: its prefill's went back when the prefill ended,
   * and no decode engine took it). Its prompt's KV stays pinned on the prefill engine
   * until vLLM's own timeout: vLLM frees it only when a decode engine reads it or drops
   * a request for it before scheduling it, and neither can be asked for over HTTP
   * without a decode engine's work (README, "Disaggregated prefill/decode"). False when
   * the call is not held.
   */
  leaveHeld(pending: PendingCall): boolean {
    const callId = pending.call.callId;
    if (this.#held.get(callId)?.pending !== pending) return false;
    this.#held.delete(callId);
    this.#host.finish(pending, clientClosedResponse(callId));
    return true;
  }

  start(pending: PendingCall, prefillId: string, prefill: EngineSlot, now: number): void {
    const host = this.#host;
    host.roleMeter?.prefillQueued(pending.call.callId, pending.call.promptTokens, 0);
    const controller = new AbortController();
    pending.stage = "running";
    pending.attempt = { engineId: prefillId, controller };
    const callId = pending.call.callId;
    const form = formFor(pending.forms, NO_NATIVE_APIS);
    let prefillEnd: RelayEnd | undefined;
    relayToEngine({
      engine: prefill.target,
      callId,
      api: form.api,
      path: form.path,
      body: vllmPrefillBody(host.bodyFor(pending, prefill, form)),
      stream: false,
      queueMs: now - pending.call.enqueuedAt,
      dispatchedAt: now,
      signal: attemptSignalOf(controller.signal),
      http: host.http,
      clock: host.clock,
      serviceOf: (wallMs, facts) => host.core.serviceMs(prefillId, wallMs, facts?.usage),
      onEnd: (end) => {
        prefillEnd = end;
        this.#legs.prefillEnded(pending, prefillId, end);
      },
    }).then(
      async (start) => {
        if (start.kind !== "response") return host.attemptStarted(pending, prefillId, start, form);
        if (!start.response.ok) {
          // The request's fault (or a body that broke off): that answer is the call's.
          this.#legs.close(pending, prefillEnd);
          return this.#legs.deliver(pending, prefillId, start.response, form);
        }
        const handoff = await start.response.json().then(handoffOf, () => undefined);
        this.#prefilled(pending, prefillId, form, handoff, prefillEnd);
      },
      (error: unknown) => this.#legs.relayThrew(pending, prefillId, error),
    );
  }

  /** The prefill engine answered: the decode goes to a decode engine with its handoff (or, without one, to compute the prompt itself). */
  #prefilled(pending: PendingCall, prefillId: string, form: EngineRequestForm, handoff: KvTransferParams | undefined, prefillEnd: RelayEnd | undefined): void {
    const host = this.#host;
    const callId = pending.call.callId;
    const heldSince = this.#held.get(callId)?.since;
    this.#held.delete(callId);
    if (host.closed() || pending.client.gone) {
      host.finish(pending, host.closed() ? shuttingDownResponse(callId, host.retryAfter()) : clientClosedResponse(callId));
      return;
    }
    if (handoff === undefined && heldSince === undefined) console.warn(`agentix pool: call ${callId}: prefill engine ${prefillId} answered without kv_transfer_params; the decode engine computes the prompt`);
    const now = host.clock.now();
    // Its KV waits for decode room from now, placed or held: decode demand the role controller must see (a held decode most of all).
    host.roleMeter?.decodeQueued(callId, pending.call.promptTokens);
    const admitted = host.core.admitDecode(pending.call, pending.failedEngines, heldSince === undefined ? 0 : now - heldSince);
    if (admitted !== undefined && "held" in admitted) {
      // No decode engine admits it now: it waits (its KV pinned on the prefill engine) and is asked again at every pump.
      if (heldSince === undefined) host.metrics.decodesHeld.inc({ reason: admitted.held });
      this.#held.set(callId, { since: heldSince ?? now, pending, retry: () => this.#prefilled(pending, prefillId, form, handoff, prefillEnd) });
      return;
    }
    const decodeId = admitted?.engineId;
    const decode = decodeId === undefined ? undefined : host.slot(decodeId);
    if (decodeId === undefined || decode === undefined) {
      host.metrics.splitHandoffs.inc({ outcome: "no_decode_engine" });
      this.#legs.recompute(pending, prefillId, "no decode engine is healthy");
      return;
    }
    host.metrics.splitHandoffs.inc({ outcome: handoff === undefined ? "no_kv_transfer_params" : "handed_off" });
    // The prefill engine's copy is the program's next call's prefix (and a failed decode's recompute): kept through the decode.
    if (handoff !== undefined) host.prefillHandedOff(pending, prefillId, decodeId);
    // With the KV handed over, the prompt is billed as the prefill engine ran it; without, the decode engine computed it and says so.
    const prefillPrompt = handoff === undefined ? undefined : prefillEnd?.facts?.usage;
    const body = vllmDecodeBody(host.bodyFor(pending, decode, form), handoff);
    this.#startDecode(pending, { prefillId, decodeId, decode, form, body }, prefillEnd?.serviceMs ?? 0, handoff !== undefined, prefillPrompt);
  }

  /** The decode of a split call; its answer is the client's. A failure before its first byte recomputes the call whole. */
  #startDecode(pending: PendingCall, leg: DecodeLeg, prefillServiceMs: number, handedOff: boolean, prefillPrompt: CallUsage | undefined): void {
    const host = this.#host;
    const { prefillId, decodeId, decode, form } = leg;
    const controller = new AbortController();
    pending.attempt = { engineId: decodeId, controller };
    const now = host.clock.now();
    host.heldOn(pending.context, decodeId);
    relayToEngine({
      engine: decode.target,
      callId: pending.call.callId,
      api: form.api,
      path: form.path,
      body: leg.body,
      stream: pending.stream,
      queueMs: now - pending.call.enqueuedAt,
      // The edge's affinity hint for the program's next call: its prefix is cached where it was prefilled.
      statsEngineId: prefillId,
      dispatchedAt: now,
      signal: attemptSignalOf(controller.signal),
      http: host.http,
      clock: host.clock,
      // The call's service is both legs': the prefill's, and the decode's with the prompt it was handed.
      serviceOf: (wallMs, facts) => prefillServiceMs + host.core.serviceMs(decodeId, wallMs, handedOff ? handedOffTokens(facts?.usage) : facts?.usage),
      onEnd: (end) => {
        this.#legs.decodeEnded(pending, decodeId, end);
        this.#legs.close(pending, end);
      },
    }).then(
      (start) => {
        host.roleMeter?.decodeStarted(pending.call.callId);
        if (start.kind === "response" && prefillPrompt !== undefined) {
          return host.attemptStarted(pending, decodeId, { kind: "response", response: billPromptFromPrefill(start.response, prefillPrompt) }, form);
        }
        if (start.kind !== "failed") return host.attemptStarted(pending, decodeId, start, form);
        this.#legs.decodeRefused(pending, decodeId, start);
        this.#legs.recompute(pending, decodeId, start.reason);
        host.pump();
      },
      (error: unknown) => this.#legs.relayThrew(pending, decodeId, error),
    );
  }
}

interface DecodeLeg {
  prefillId: string;
  decodeId: string;
  decode: EngineSlot;
  form: EngineRequestForm;
  body: Record<string, unknown>;
}
