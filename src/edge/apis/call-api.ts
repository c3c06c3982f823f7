import type { Usage } from "../../protocol/chat.js";
import type { PoolPath } from "../../protocol/signing.js";
import type { CallApi } from "../db/schema.js";
import type { StreamRelayFilter } from "../chat/sse-filter.js";

/*
 * One model-calling API as the edge serves it: how its body is read and allow-listed,
 * what it asks for (model, limit, stream), the bytes forwarded with the reserved limit
 * set, the pool path it goes to, and where its answers carry usage. Everything else
 * (admission, the program session, pool choice, failover, metering) is the same for
 * every API (routes/calls.ts).
 */

/** A request of some API whose every field is allowed for its tenant. */
export interface ParsedCall {
  model: string;
  stream: boolean;
  /** The client asked for the usage in its stream (chat's stream_options.include_usage). */
  includeUsage: boolean;
  /** The completion limit the client asked for, if any. */
  requestedMaxTokens: number | undefined;
  /** Where that limit lives in the request: the `param` of limit errors. */
  maxTokensField: string;
  /** Prompt tokens as tokens.ts counts them: the reservation's prompt part. */
  promptEstimate: number;
  /** The bytes to sign and send: the allowed request with the effective limit set. */
  forwardBody(maxTokens: number): Uint8Array<ArrayBuffer>;
  /** A stored response this call continues (Responses API previous_response_id). */
  continues?: string;
  /** The same call with the conversation it continues put before its input. */
  withHistory?(items: unknown[]): ParsedCall;
  /** An identifier the client sends per session, as "<where>:<value>" (program recognition, before the conversation). */
  sessionKey?: string;
  /** The call's messages in the conversation index's canonical form (program recognition); absent: not a conversation. */
  conversation?: string[];
  /** The canonical reply in the API's whole answer (the assistant message the client replays next). */
  replyOf?(answer: unknown): string | undefined;
  /** What the call's program keeps of its answer for a later call to continue, if anything. */
  afterAnswer?(answer: unknown): { responseId: string; parentId: string | null; items: unknown[] } | undefined;
}

export interface CallApiSpec {
  /** The ledger's name for it (usage.api). */
  api: CallApi;
  poolPath: PoolPath;
  /** Parses and allow-lists a body (400 naming the field otherwise); touches no state. */
  parse(bytes: Uint8Array, allowedExtensions: readonly string[]): ParsedCall;
  /** The usage in a whole (non-streaming) answer, when it has one. */
  usageOf(answer: unknown): Usage | undefined;
  /** What of the pool's stream reaches the client, and what the edge learns from it. */
  streamFilter(includeUsage: boolean): StreamRelayFilter;
}

/** OpenAI's prompt_cache_key (chat completions and Responses) as a session key: clients such as Codex set it per conversation. */
export const promptCacheSessionKey = (key: string | null | undefined): { sessionKey: string } | undefined =>
  key ? { sessionKey: `openai.prompt_cache_key:${key.slice(0, 512)}` } : undefined;

/** Serialises a forwarded body (TextEncoder always allocates a fresh ArrayBuffer, never a shared one). */
export const jsonBytes = (body: unknown): Uint8Array<ArrayBuffer> => new TextEncoder().encode(JSON.stringify(body)) as Uint8Array<ArrayBuffer>;
