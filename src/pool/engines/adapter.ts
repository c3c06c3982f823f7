import type { CallApi } from "../engine-request.js";
import type { RoleSwitchMode } from "../../core/roles/roles.js";
import type { Sample } from "../prometheus-text.js";
import type { SplitMode } from "./split.js";

/*
 * What differs between engine kinds: the request's priority field, the names of the
 * load gauges on /metrics, where health is probed, and whether a stream can report
 * usage on every chunk. Everything else is the OpenAI-compatible chat-completions
 * surface they all share.
 */

export const ENGINE_KINDS = ["vllm", "sglang", "openai"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

export const CHAT_COMPLETIONS_PATH = "/v1/chat/completions";

/** Where a call sits in the pool's queue when it is dispatched. */
export interface QueuePosition {
  /** 0 = highest priority. */
  level: number;
  /** Number of levels K. */
  levels: number;
}

export interface UpstreamOptions extends QueuePosition {
  /** The API the body is in (engine-request.ts): only chat completions and completions take `stream_options`. */
  api: CallApi;
  /** Model name the engine serves, replacing the client's. */
  model?: string | undefined;
}

export interface EngineAdapter {
  readonly kind: EngineKind;
  /** Value of the request's `priority` field, or undefined when the engine takes none. */
  priorityFor(position: QueuePosition): number | undefined;
  /** Gauge names, first present wins (engines renamed them across versions). */
  readonly metricNames: { readonly waiting: readonly string[]; readonly kvUsage: readonly string[] };
  readonly healthPath: string;
  /** Undefined when the engine exposes no Prometheus endpoint. */
  readonly metricsPath: string | undefined;
  /** The engine's KV-cache capacity in tokens, read from its metrics; undefined when they do not say. */
  kvCapacityTokens?(samples: readonly Sample[]): number | undefined;
  /**
   * Whether the engine takes `stream_options.continuous_usage_stats` (vLLM, SGLang):
   * usage on every chunk, so a stream cut short still says how many tokens the engine
   * had produced. OpenAI's own API does not know the field.
   */
  readonly continuousUsage: boolean;
  /** How the engine splits a call between a prefill and a decode engine (split.ts); undefined: it cannot. */
  readonly split: SplitMode | undefined;
  /**
   * How a split engine of this kind switches roles by default (core/roles/engine-roles.ts):
   * "overlap" when one engine serves both sides, "drain" when its side is fixed at start.
   */
  readonly roleSwitch: RoleSwitchMode;
  /** The JSON body sent to the engine for this client body. */
  buildBody(clientBody: Readonly<Record<string, unknown>>, options: UpstreamOptions): Record<string, unknown>;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The client body with the pool's changes: the engine's model name, the engine's
 * priority (a client-sent `priority` is dropped: the pool's queue decides order;
 * vLLM takes it on chat, completions and responses, and ignores it on messages), and
 * for chat and completion streams `stream_options.include_usage: true`, because the
 * edge meters every call; the edge drops the extra usage chunk when its client did
 * not ask for it. An engine with `continuousUsage` is also asked for
 * `continuous_usage_stats: true` (usage on every chunk; the edge takes it out of the
 * chunks its client reads). Messages and Responses streams carry their usage in their
 * own events and know no `stream_options` of this kind.
 */
function withoutPriority(clientBody: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const { priority: _clientPriority, ...rest } = clientBody;
  return rest;
}

export function buildUpstreamBody(
  adapter: Pick<EngineAdapter, "priorityFor" | "continuousUsage">,
  clientBody: Readonly<Record<string, unknown>>,
  options: UpstreamOptions,
): Record<string, unknown> {
  /*
   * The client's priority is not passed on. One copy either way. Object.assign onto a
   * fresh object, not a spread: V8's spread clone is fast alone, but the fields added
   * to it next (the priority; a stream's options) take its slow path, 0.55 vs 0.11 µs a
   * body in a warm loop, and its JSON.stringify was slower too (1.4 vs 0.9 µs).
   */
  const body: Record<string, unknown> = Object.hasOwn(clientBody, "priority") ? withoutPriority(clientBody) : Object.assign({}, clientBody);
  if (options.model !== undefined) body.model = options.model;
  const priority = adapter.priorityFor(options);
  if (priority !== undefined) body.priority = priority;
  if (body.stream === true && (options.api === "chat" || options.api === "completions")) {
    const streamOptions = isRecord(body.stream_options) ? body.stream_options : {};
    body.stream_options = { ...streamOptions, include_usage: true, ...(adapter.continuousUsage ? { continuous_usage_stats: true } : {}) };
  }
  return body;
}
