import { z } from "zod";

/*
 * vLLM's disaggregated-serving fields on a chat or completion request and answer
 * (issue 13), as its KV connector reads and writes them (vllm/distributed/kv_transfer/
 * kv_connector/v1/nixl_connector.py; the proxy that drives it:
 * tests/v1/kv_connector/nixl_integration/toy_proxy_server.py):
 * - the prefill request carries `do_remote_decode: true` and nulls for the rest; the
 *   prefill engine computes the prompt, holds its blocks until a decode engine reads
 *   them (or VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes) and answers with
 *   `do_remote_prefill: true` and where the blocks are;
 * - the decode request carries that answer's object unchanged; the decode engine pulls
 *   the blocks and generates.
 * Both engines ignore fields they do not know, so the object is kept loose.
 */

export const KV_TRANSFER_PARAMS_FIELD = "kv_transfer_params";

export const KvTransferParams = z.looseObject({
  do_remote_decode: z.boolean().nullish(),
  do_remote_prefill: z.boolean().nullish(),
  remote_engine_id: z.string().nullish(),
  remote_request_id: z.string().nullish(),
  remote_block_ids: z.array(z.int().nonnegative()).nullish(),
  remote_host: z.string().nullish(),
  remote_port: z.int().min(0).max(65_535).nullish(),
  tp_size: z.int().positive().nullish(),
});
export type KvTransferParams = z.infer<typeof KvTransferParams>;

/** What the proxy puts on the prefill request: compute the prompt, hold its KV for a decode engine. */
export const PREFILL_KV_TRANSFER_PARAMS: KvTransferParams = Object.freeze({
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
});

/** A prefill engine's answer's handoff, when it gave one the decode engine can read (do_remote_prefill set). */
export function handoffOf(answer: unknown): KvTransferParams | undefined {
  if (typeof answer !== "object" || answer === null) return undefined;
  const parsed = KvTransferParams.safeParse((answer as Record<string, unknown>)[KV_TRANSFER_PARAMS_FIELD]);
  return parsed.success && parsed.data.do_remote_prefill === true ? parsed.data : undefined;
}
