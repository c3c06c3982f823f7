import { KV_TRANSFER_PARAMS_FIELD, type KvTransferParams, PREFILL_KV_TRANSFER_PARAMS } from "../../protocol/kv-transfer.js";

/*
 * The request bodies of a call split between a prefill and a decode engine (issue 13),
 * each as its engine's own disaggregated serving sends them:
 * - vLLM (KV connector): two steps. The prefill request is the call with
 *   kv_transfer_params asking for a remote decode, `stream: false`, `max_tokens: 1`
 *   (and max_completion_tokens when sent), without stream_options, min_tokens and
 *   min_completion_tokens; the decode request is the call as it came, with the prefill
 *   answer's kv_transfer_params (vLLM's tests/v1/kv_connector/nixl_integration/
 *   toy_proxy_server.py, send_request_to_service and _handle_completions).
 * - SGLang (PD mode): one body to both at once, with bootstrap_host (the prefill
 *   engine's host), bootstrap_port (its --disaggregation-bootstrap-port) and a random
 *   bootstrap_room naming the transfer (sglang/srt/disaggregation/mini_lb.py,
 *   _forward_to_backend); the decode engine's answer is the call's.
 */

export type SplitMode = "kv-transfer-params" | "bootstrap";

export function vllmPrefillBody(body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { stream_options: _options, min_tokens: _min, min_completion_tokens: _minCompletion, ...rest } = body;
  const prefill: Record<string, unknown> = { ...rest, [KV_TRANSFER_PARAMS_FIELD]: { ...PREFILL_KV_TRANSFER_PARAMS }, stream: false, max_tokens: 1 };
  if ("max_completion_tokens" in body) prefill.max_completion_tokens = 1;
  return prefill;
}

/** The decode request: the call, with the prefill answer's handoff when it gave one (else the decode engine computes the prompt itself). */
export function vllmDecodeBody(body: Readonly<Record<string, unknown>>, handoff: KvTransferParams | undefined): Record<string, unknown> {
  return handoff === undefined ? { ...body } : { ...body, [KV_TRANSFER_PARAMS_FIELD]: handoff };
}

export interface Bootstrap {
  host: string;
  port: number;
  room: number;
}

export function sglangBootstrapBody(body: Readonly<Record<string, unknown>>, bootstrap: Bootstrap): Record<string, unknown> {
  return { ...body, bootstrap_host: bootstrap.host, bootstrap_port: bootstrap.port, bootstrap_room: bootstrap.room };
}

/**
 * A bootstrap room: SGLang draws random.randint(0, 2**63 - 1); JSON numbers in
 * JavaScript are exact only to 2**53 - 1, so the room is drawn below that.
 */
export function bootstrapRoom(random: () => number = Math.random): number {
  return Math.floor(random() * Number.MAX_SAFE_INTEGER);
}

/** The host part of an engine's base URL (SGLang's proxy sends the prefill server's hostname). */
export function hostOf(url: string): string {
  return new URL(url).hostname;
}
