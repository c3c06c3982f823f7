import { type Dispatcher, fetch } from "undici";
import { z } from "zod";
import type { CountTokensRequest } from "../protocol/messages.js";
import { messagesToChatRequest } from "../protocol/translate/messages-chat.js";
import type { CallApi } from "./engine-request.js";
import type { EngineTarget } from "./relay.js";

/*
 * Anthropic's count_tokens, counted by an engine's own tokenizer and chat template
 * (what the call will be billed by), not queued: counting renders and tokenizes the
 * prompt on the engine's API server, and generates nothing. An engine that serves
 * Messages natively is asked `/v1/messages/count_tokens` (vLLM, SGLang); a vLLM engine
 * that does not is asked `/tokenize` with the chat messages the pool would send it.
 * Other engines cannot count: the edge then answers its own estimate.
 */

export interface CountingEngine {
  target: EngineTarget;
  /** Model name sent to the engine instead of the client's. */
  model: string | undefined;
  nativeApis: ReadonlySet<CallApi>;
  healthy: boolean;
}

const MessagesCount = z.object({ input_tokens: z.int().nonnegative() });
/** vLLM's TokenizeResponse. */
const TokenizeCount = z.object({ count: z.int().nonnegative() });

export type TokenCount = { ok: true; inputTokens: number; engine: string } | { ok: false; reason: string };

function howItCounts(engine: CountingEngine): "messages" | "tokenize" | undefined {
  if (engine.nativeApis.has("messages")) return "messages";
  return engine.target.adapter.kind === "vllm" ? "tokenize" : undefined;
}

/** The first healthy engine that can count, native Messages engines first; undefined when none can. */
export function countingEngine(engines: readonly CountingEngine[]): CountingEngine | undefined {
  const healthy = engines.filter((engine) => engine.healthy);
  return healthy.find((engine) => howItCounts(engine) === "messages") ?? healthy.find((engine) => howItCounts(engine) === "tokenize");
}

interface CountRequest {
  path: string;
  body: Record<string, unknown>;
  /** The count in the engine's answer; undefined when it is not one. */
  read(json: unknown): number | undefined;
}

function countRequest(how: "messages" | "tokenize", request: CountTokensRequest, model: string): CountRequest {
  if (how === "messages") {
    return { path: "/v1/messages/count_tokens", body: { ...request, model }, read: (json) => MessagesCount.safeParse(json).data?.input_tokens };
  }
  const chat = messagesToChatRequest({ ...request, max_tokens: 1 });
  return {
    path: "/tokenize",
    body: { model, messages: chat.messages, ...(chat.tools ? { tools: chat.tools } : {}), add_generation_prompt: true },
    read: (json) => TokenizeCount.safeParse(json).data?.count,
  };
}

export async function countTokensOn(
  engine: CountingEngine,
  request: CountTokensRequest,
  options: { http: Dispatcher; timeoutMs: number },
): Promise<TokenCount> {
  const how = howItCounts(engine);
  if (how === undefined) return { ok: false, reason: `engine ${engine.target.id} cannot count tokens` };
  const { path, body, read } = countRequest(how, request, engine.model ?? request.model);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (engine.target.apiKey) headers.authorization = `Bearer ${engine.target.apiKey}`;
  try {
    const res = await fetch(`${engine.target.url}${path}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      dispatcher: options.http,
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) return { ok: false, reason: `engine ${engine.target.id} answered ${res.status} to ${path}: ${text.slice(0, 300)}` };
    const inputTokens = read(JSON.parse(text));
    if (inputTokens === undefined) return { ok: false, reason: `engine ${engine.target.id}'s ${path} answer is not a count` };
    return { ok: true, inputTokens, engine: engine.target.id };
  } catch (error) {
    return { ok: false, reason: `engine ${engine.target.id} did not count (${error instanceof Error ? error.message : String(error)})` };
  }
}
