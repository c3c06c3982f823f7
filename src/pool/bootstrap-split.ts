import { attemptSignalOf } from "./attempt-abort.js";
import { formFor } from "./engine-request.js";
import { bootstrapRoom, hostOf, sglangBootstrapBody } from "./engines/split.js";
import type { EngineSlot, PendingCall } from "./pending-call.js";
import { type RelayEnd, type RelayRequest, type RelayStart, relayToEngine } from "./relay.js";
import type { SplitCallHost } from "./split-call-host.js";
import { handedOffTokens, NO_NATIVE_APIS, type SplitLegs } from "./split-legs.js";
import { billPromptFromPrefill, pendingPrefillPrompt } from "./split-usage.js";

/*
 * SGLang's PD mode (engines/split.ts): the same body with the bootstrap fields to the
 * prefill and the decode engine at once, as its proxy does; the decode's answer is the
 * client's and the prefill's is read to its end: its usage is the prompt's, and the
 * decode's answer is billed with it (split-usage.ts). A prefill
 * that does not start fails the attempt (the decode would wait for KV that never
 * comes) and is retried as any attempt; a decode that does not start recomputes the
 * call whole.
 */

type RelayServiceOf = NonNullable<RelayRequest["serviceOf"]>;

/**
 * How long the decode's usage waits for the prefill leg's: the prefill answers once its
 * KV has gone to the decode engine, long before the decode's last chunk, so this only
 * bounds a prefill answer that hangs.
 */
const PREFILL_USAGE_WAIT_MS = 10_000;

export class BootstrapSplit {
  readonly #host: SplitCallHost;
  readonly #legs: SplitLegs;

  constructor(host: SplitCallHost, legs: SplitLegs) {
    this.#host = host;
    this.#legs = legs;
  }

  start(pending: PendingCall, prefillId: string, prefill: EngineSlot, now: number): void {
    const host = this.#host;
    const legs = this.#legs;
    const callId = pending.call.callId;
    host.roleMeter?.prefillQueued(callId, pending.call.promptTokens, 0);
    const form = formFor(pending.forms, NO_NATIVE_APIS);
    const decodeId = host.core.placeDecode(pending.call, pending.failedEngines);
    const decode = decodeId === undefined ? undefined : host.slot(decodeId);
    pending.stage = "running";
    if (decodeId === undefined || decode === undefined) {
      host.release(pending, prefillId, "engine_error", { serviceMs: 0 });
      host.metrics.splitHandoffs.inc({ outcome: "no_decode_engine" });
      legs.recompute(pending, prefillId, "no decode engine is healthy");
      return;
    }
    const call = new AbortController();
    const prefillLeg = new AbortController();
    const decodeLeg = new AbortController();
    call.signal.addEventListener("abort", () => {
      prefillLeg.abort(call.signal.reason);
      decodeLeg.abort(call.signal.reason);
    });
    pending.attempt = { engineId: decodeId, controller: call };
    host.heldOn(pending.context, decodeId);
    const bootstrap = { host: hostOf(prefill.target.url), port: prefill.bootstrapPort, room: bootstrapRoom() };
    let prefillEnd: RelayEnd | undefined;
    const prefillPrompt = pendingPrefillPrompt(PREFILL_USAGE_WAIT_MS);
    let decodeEnd: RelayEnd | undefined;
    let delivered = false;
    const relay = (slot: EngineSlot, signal: AbortSignal, onEnd: (end: RelayEnd) => void, serviceOf: RelayServiceOf) =>
      relayToEngine({
        engine: slot.target,
        callId,
        api: form.api,
        path: form.path,
        body: sglangBootstrapBody(host.bodyFor(pending, slot, form), bootstrap),
        stream: pending.stream,
        queueMs: now - pending.call.enqueuedAt,
        statsEngineId: prefillId,
        dispatchedAt: now,
        signal: attemptSignalOf(signal),
        http: host.http,
        clock: host.clock,
        serviceOf,
        onEnd,
      });
    const prefillStart = relay(
      prefill,
      prefillLeg.signal,
      (end) => {
        prefillEnd = end;
        prefillPrompt.settle(end.outcome === "completed" ? end.facts?.usage : undefined);
        legs.prefillEnded(pending, prefillId, end);
      },
      (wallMs, facts) => host.core.serviceMs(prefillId, wallMs, facts?.usage),
    );
    const decodeStart = relay(
      decode,
      decodeLeg.signal,
      (end) => {
        decodeEnd = end;
        legs.decodeEnded(pending, decodeId, end);
        if (delivered) legs.close(pending, end);
      },
      (wallMs, facts) => (prefillEnd?.serviceMs ?? 0) + host.core.serviceMs(decodeId, wallMs, handedOffTokens(facts?.usage)),
    );
    /** A leg's answer nobody reads: cancelled, so its relay ends (and gives its slot back). */
    const drop = (start: RelayStart) => {
      if (start.kind === "response") void start.response.body?.cancel().catch(() => undefined);
    };
    Promise.all([prefillStart, decodeStart]).then(
      ([p, d]) => {
        if (p.kind !== "response" || !p.response.ok) {
          prefillPrompt.settle(undefined);
          decodeLeg.abort(new Error("the prefill leg did not start"));
          drop(d);
          if (d.kind === "failed") host.core.decodeEnded(callId, { serviceMs: 0 }, host.clock.now());
          if (p.kind === "response") {
            // The request's fault: that answer is the call's.
            delivered = true;
            legs.close(pending, prefillEnd);
            return legs.deliver(pending, prefillId, p.response, form);
          }
          return host.attemptStarted(pending, prefillId, p, form);
        }
        if (d.kind === "failed") {
          drop(p);
          legs.decodeRefused(pending, decodeId, d);
          legs.recompute(pending, decodeId, d.reason);
          host.pump();
          return;
        }
        // The prefill's answer is not the client's; read to its end, it gives back the prefill slot with the prompt's usage.
        void p.response.arrayBuffer().catch(() => undefined);
        host.metrics.splitHandoffs.inc({ outcome: "handed_off" });
        host.prefillHandedOff(pending, prefillId, decodeId);
        delivered = true;
        if (decodeEnd !== undefined) legs.close(pending, decodeEnd);
        const answer = d.kind === "response" ? { kind: "response" as const, response: billPromptFromPrefill(d.response, prefillPrompt.prompt) } : d;
        return host.attemptStarted(pending, decodeId, answer, form);
      },
      (error: unknown) => legs.relayThrew(pending, prefillId, error),
    );
  }
}
