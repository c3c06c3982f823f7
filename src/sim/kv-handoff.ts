import { Hono } from "hono";
import { Counter, type Registry } from "prom-client";
import { z } from "zod";
import { type KvTransferParams } from "../protocol/kv-transfer.js";
import { openAIErrorResponse } from "../protocol/errors.js";
import { randomToken } from "../protocol/ids.js";
import type { EngineModel } from "./engine-model.js";
import { promptBlockHashes } from "./token-hash.js";

/*
 * Disaggregated serving in the simulated engine (issue 13), as vLLM's NixlConnector
 * does it (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py):
 * - a request whose kv_transfer_params ask for a remote decode (do_remote_decode) is
 *   prefilled as any (the pool asks for max_tokens 1); when it finishes, its prompt's
 *   cached blocks stay pinned and its answer carries kv_transfer_params naming them
 *   (do_remote_prefill, remote_block_ids, remote_engine_id, remote_request_id,
 *   remote_host/remote_port: this engine), as request_finished returns them. They are
 *   unpinned when a decode engine reads them, or after VLLM_NIXL_ABORT_REQUEST_TIMEOUT
 *   (480 s of model time) as vLLM frees blocks no decode engine came for;
 * - a request with do_remote_prefill is a remote-KV request to the engine model
 *   (EngineRequest.remoteKv, reported): it waits in the queue until blocks for its whole
 *   prompt fit, as vLLM's scheduler holds it; then the pull runs (the transfer over the
 *   engine link for the profile, kv-links.ts, timed by the model from that moment), and at
 *   its end the decode engine reads the blocks from the engine its params name (NIXL's
 *   read and its notification to the prefill engine are one HTTP request here, POST
 *   KV_READ_PATH on that engine, which unpins them then, as vLLM's prefill frees them on
 *   that notification) and tells the model how many tokens arrived; it computes only
 *   past them (the last partial block: a prefill engine holds whole blocks) before it
 *   decodes. Blocks that are gone (timed out, never held, the engine unreachable) are
 *   recomputed: vLLM's kv_load_failure_policy "recompute" (vllm/config/kv_transfer.py).
 * Both are counted on /metrics: agentix_sim_kv_handoffs_total{side, outcome}.
 */

/** Where a decode engine reads a prefill engine's held KV (the simulated stand-in for NIXL's pull). */
export const KV_READ_PATH = "/agentix/sim/kv/read";

/** VLLM_NIXL_ABORT_REQUEST_TIMEOUT's default, 480 s (vllm/envs.py). */
export const DEFAULT_KV_HOLD_TIMEOUT_MS = 480_000;

const KvReadRequest = z.strictObject({ remote_request_id: z.string().min(1).max(200) });
const KvReadAnswer = z.strictObject({ tokens: z.int().nonnegative() });

export interface KvHandoffOptions {
  model: EngineModel;
  /** The engine's ID in its handoffs; default `sim-<port>`. */
  engineId?: string | undefined;
  /** Model ms per real ms (the driver's); Infinity: no real wait. */
  timeScale: number;
  /** This engine's address, once it listens (the decode engine reads the KV from it). */
  address: () => { host: string; port: number } | undefined;
  registry: Registry;
  /** Model ms a prefill's KV is held for a decode engine; default vLLM's 480 s. */
  holdTimeoutMs?: number;
}

interface Held {
  blocks: number[];
  timer: NodeJS.Timeout;
}

export class KvHandoffs {
  readonly #options: KvHandoffOptions;
  readonly #held = new Map<string, Held>();
  readonly #counter: Counter<"side" | "outcome">;

  constructor(options: KvHandoffOptions) {
    this.#options = options;
    this.#counter = new Counter({
      name: "agentix_sim_kv_handoffs_total",
      help: "Disaggregated KV handoffs: prefill side held / read / expired; decode side imported / recomputed (the blocks were gone).",
      labelNames: ["side", "outcome"] as const,
      registers: [options.registry],
    });
  }

  /** A finished remote-decode prefill: pins its prompt's cached blocks and says where they are; undefined without an address to give. */
  hold(promptTokens: readonly string[]): KvTransferParams | undefined {
    const address = this.#options.address();
    if (address === undefined) return undefined;
    const { model } = this.#options;
    const blocks = model.holdCachedPrefix(promptBlockHashes(promptTokens, model.profile.blockSize));
    const requestId = `sim-kv-${randomToken(16)}`;
    const timeoutMs = (this.#options.holdTimeoutMs ?? DEFAULT_KV_HOLD_TIMEOUT_MS) / this.#options.timeScale;
    const timer = setTimeout(() => {
      if (this.#release(requestId) !== undefined) this.#counter.inc({ side: "prefill", outcome: "expired" });
    }, Number.isFinite(timeoutMs) ? timeoutMs : 0);
    timer.unref();
    this.#held.set(requestId, { blocks, timer });
    this.#counter.inc({ side: "prefill", outcome: "held" });
    return {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: blocks,
      remote_engine_id: this.#options.engineId ?? `sim-${address.port}`,
      remote_request_id: requestId,
      remote_host: address.host,
      remote_port: address.port,
      tp_size: 1,
    };
  }

  /** A decode engine read the KV: unpinned; the tokens it held, or undefined when it holds none by that ID (expired, unknown). */
  read(requestId: string): number | undefined {
    const blocks = this.#release(requestId);
    if (blocks === undefined) return undefined;
    this.#counter.inc({ side: "prefill", outcome: "read" });
    return blocks.length * this.#options.model.profile.blockSize;
  }

  /**
   * The decode side's pull, started when the engine had room for the prompt: after
   * `transferRealMs` (the transfer, in real ms) it reads the prefill engine's KV, which
   * unpins it there. The tokens that arrived: 0 when the KV is gone (the prompt is then
   * computed here).
   */
  async pull(params: KvTransferParams, transferRealMs: number): Promise<number> {
    if (transferRealMs > 0 && Number.isFinite(transferRealMs)) await new Promise((resolve) => setTimeout(resolve, transferRealMs));
    const tokens = (await readRemote(params)) ?? 0;
    this.#counter.inc({ side: "decode", outcome: tokens > 0 ? "imported" : "recomputed" });
    return tokens;
  }

  /** KV held now (requests), for tests. */
  get heldCount(): number {
    return this.#held.size;
  }

  close(): void {
    for (const id of [...this.#held.keys()]) this.#release(id);
  }

  #release(requestId: string): number[] | undefined {
    const held = this.#held.get(requestId);
    if (held === undefined) return undefined;
    this.#held.delete(requestId);
    clearTimeout(held.timer);
    this.#options.model.releaseHeld(held.blocks);
    return held.blocks;
  }
}

/** The tokens the prefill engine named in `params` held for us, or undefined when it could not say. */
async function readRemote(params: KvTransferParams): Promise<number | undefined> {
  const { remote_host: host, remote_port: port, remote_request_id: requestId } = params;
  if (!host || !port || !requestId) return undefined;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  try {
    const response = await fetch(`http://${urlHost}:${port}${KV_READ_PATH}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ remote_request_id: requestId }),
      signal: AbortSignal.timeout(5_000),
    });
    if (!response.ok) return undefined;
    const answer = KvReadAnswer.safeParse(await response.json());
    return answer.success ? answer.data.tokens : undefined;
  } catch {
    return undefined;
  }
}

/** The prefill side's route a decode engine reads the KV through. */
export function kvHandoffRoutes(handoffs: KvHandoffs): Hono {
  const app = new Hono();
  app.post(KV_READ_PATH, async (c) => {
    const parsed = KvReadRequest.safeParse(await c.req.json().catch(() => undefined));
    if (!parsed.success) return openAIErrorResponse(400, "The body must be {\"remote_request_id\": …}.", { param: "remote_request_id" });
    const tokens = handoffs.read(parsed.data.remote_request_id);
    if (tokens === undefined) return openAIErrorResponse(404, "No KV is held under that request ID.", { code: "kv_not_held" });
    return c.json({ tokens });
  });
  return app;
}
