/**
 * Every header name Agentix reads or writes. Nothing else in the codebase spells
 * an `x-agentix-*` name: import from here.
 */
export const Header = {
  // Client → edge, and edge → client.
  program: "x-agentix-program",
  thread: "x-agentix-thread",
  parentThread: "x-agentix-parent-thread",
  // Edge → pool (all covered by the signature).
  tenant: "x-agentix-tenant",
  call: "x-agentix-call",
  serviceMs: "x-agentix-service-ms",
  pathMs: "x-agentix-path-ms",
  waitMs: "x-agentix-wait-ms",
  engine: "x-agentix-engine",
  weight: "x-agentix-weight",
  /** The thread's context generation: one more each time the program compacted or rewrote the thread's history (core/recognition/context-generation.ts). */
  contextGeneration: "x-agentix-context-generation",
  ts: "x-agentix-ts",
  /** Which of the pool's signing keys made the signature (covered by it). */
  keyId: "x-agentix-key-id",
  /** `v3=<hex HMAC-SHA256>` (src/protocol/signing.ts). */
  signature: "x-agentix-signature",
  // Pool → edge, non-streaming (streaming carries them in the stats comment).
  queueMs: "x-agentix-queue-ms",
  /** Pool → edge, on every call's answer: its load then (calls queued and running per healthy engine). */
  poolLoad: "x-agentix-pool-load",
  /** Edge → client: the call's ID, on every chat response (OpenAI's clients expose it as the request ID). */
  requestId: "x-request-id",
  /** Edge → client: the directory ID of the pool that took the call (absent when none did). */
  pool: "x-agentix-pool",
  /** Edge → client: how the call found its program (PROGRAM_SOURCES). */
  programSource: "x-agentix-program-source",
  /** Edge → client, on count_tokens: "engine" (an engine's tokenizer counted) or "estimate" (no pool could; the edge's estimate). */
  tokenCountSource: "x-agentix-token-count-source",
  /**
   * Edge → client, only with COUNT_IO=1 (bench:edge): the Durable Object calls, their
   * sequential rounds and the D1 queries a call made before it reached a pool.
   */
  ioCounts: "x-agentix-io-counts",
  /** Edge → operator, on the CSV usage export: every call settled before this instant (ISO 8601) is in it. */
  dataAsOf: "x-agentix-data-as-of",
  /** Edge → operator, on the CSV usage export: usage rows D1 refused, quarantined in the ledgers and retried (not in it). */
  ledgerQuarantinedRows: "x-agentix-ledger-quarantined-rows",
} as const;

export type HeaderName = (typeof Header)[keyof typeof Header];

/**
 * How a call found its program: the x-agentix-program header, the program of the
 * response its previous_response_id names, an identifier its client sends per session
 * (Anthropic's metadata.user_id, OpenAI's prompt_cache_key, a configured header), its conversation (it continues an earlier
 * call's reply, forks from one, or resends a failed call: recognition/program-index.ts),
 * or none (a new program).
 */
export const PROGRAM_SOURCES = ["header", "previous_response_id", "session_key", "continuation", "fork", "retry", "new"] as const;
export type ProgramSource = (typeof PROGRAM_SOURCES)[number];

/**
 * OpenAI's rate-limit headers, which the edge sets on every chat-completions
 * response to an authenticated tenant (success and error alike). Resets are
 * durations in OpenAI's form ("1s", "6m0s", "250ms"): the time until that
 * limit is back to its full value.
 */
export const RateLimitHeader = {
  limitRequests: "x-ratelimit-limit-requests",
  remainingRequests: "x-ratelimit-remaining-requests",
  resetRequests: "x-ratelimit-reset-requests",
  limitTokens: "x-ratelimit-limit-tokens",
  remainingTokens: "x-ratelimit-remaining-tokens",
  resetTokens: "x-ratelimit-reset-tokens",
  /** Seconds until retrying can succeed (429 only). */
  retryAfter: "retry-after",
} as const;

export type RateLimitHeaderName = (typeof RateLimitHeader)[keyof typeof RateLimitHeader];

/**
 * Anthropic's headers, for clients of the Messages API (`/v1/messages`): the key in
 * `x-api-key` (bearer also works), and the rate limits under Anthropic's names, each
 * reset an RFC 3339 time rather than OpenAI's duration.
 */
export const AnthropicHeader = {
  apiKey: "x-api-key",
  version: "anthropic-version",
  /** Anthropic's request ID header (OpenAI's clients read x-request-id). */
  requestId: "request-id",
  requestsLimit: "anthropic-ratelimit-requests-limit",
  requestsRemaining: "anthropic-ratelimit-requests-remaining",
  requestsReset: "anthropic-ratelimit-requests-reset",
  tokensLimit: "anthropic-ratelimit-tokens-limit",
  tokensRemaining: "anthropic-ratelimit-tokens-remaining",
  tokensReset: "anthropic-ratelimit-tokens-reset",
} as const;

export const DEFAULT_THREAD = "main";
