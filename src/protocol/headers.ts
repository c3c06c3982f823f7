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
  ts: "x-agentix-ts",
  signature: "x-agentix-signature",
  // Pool → edge, non-streaming (streaming carries them in the stats comment).
  queueMs: "x-agentix-queue-ms",
} as const;

export type HeaderName = (typeof Header)[keyof typeof Header];

export const DEFAULT_THREAD = "main";
