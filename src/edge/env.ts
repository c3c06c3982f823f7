import { z } from "zod";
import { DEFAULT_SIGNING_KEY_ID, type SigningKey, SigningKeyId, SigningSecret } from "../protocol/signing.js";
import type { TenantLimiter } from "./limiter/tenant-limiter.js";
import type { ProgramSession } from "./program/session.js";

/** The Worker's bindings, as wrangler.toml and `wrangler secret put` provide them. */
export interface Env {
  DB: D1Database;
  PROGRAM_SESSION: DurableObjectNamespace<ProgramSession>;
  TENANT_LIMITER: DurableObjectNamespace<TenantLimiter>;
  POOL_URL?: string;
  /** The pool's name in the usage ledger; unset: POOL_URL's host. */
  POOL_NAME?: string;
  POOL_SIGNING_SECRET?: string;
  /** The ID the pool knows POOL_SIGNING_SECRET by; unset: "default". */
  POOL_SIGNING_KEY_ID?: string;
  /** Unset: the admin API is disabled. Under 32 characters (or too few distinct ones): refused at use. */
  ADMIN_TOKEN?: string;
  PROGRAM_IDLE_TTL_MS?: string;
  MAX_BODY_BYTES?: string;
  CALL_TIMEOUT_MS?: string;
  STREAM_STALL_MS?: string;
  POOL_IDLE_MS?: string;
}

const positiveInt = z.coerce.number().int().positive();

/** The vars the edge needs, parsed from their string form once per Env object. */
export const EdgeConfig = z.object({
  poolUrl: z.url({ protocol: /^https?$/ }).transform((url) => url.replace(/\/+$/, "")),
  poolName: z.string().trim().min(1).max(100).optional(),
  poolSigningSecret: SigningSecret,
  poolSigningKeyId: SigningKeyId.default(DEFAULT_SIGNING_KEY_ID),
  // Its strength is checked where it is used (middleware/admin-auth.ts), so a weak one
  // disables the admin API, not the tenants' traffic.
  adminToken: z.string().min(1).optional(),
  programIdleTtlMs: positiveInt.default(900_000),
  /** 16 MiB: long agent contexts (tool outputs, files) must fit; counted as the bytes arrive. */
  maxBodyBytes: positiveInt.default(16_777_216),
  /** A call still unanswered or streaming this long after it was sent is cut and settled as a timeout. */
  // At most 30 min: the limiter keeps closed leases 60 min, longer than any call plus its reap grace.
  callTimeoutMs: positiveInt.max(1_800_000).default(900_000),
  /**
   * A streaming client that takes no chunk for this long while one waits is treated as gone.
   * The runtime reads ahead into socket buffers, so a write waits only once a client is
   * hundreds of chunks behind; a disconnect the runtime never reports looks exactly like this.
   */
  streamStallMs: positiveInt.default(10_000),
  /** A pool stream that sends nothing for this long mid-stream is treated as broken. */
  poolIdleMs: positiveInt.default(120_000),
});
export type EdgeConfig = z.infer<typeof EdgeConfig>;

/** The pool's name as the usage ledger records it: POOL_NAME, else POOL_URL's host. */
export function poolNameOf(config: EdgeConfig): string {
  return config.poolName ?? new URL(config.poolUrl).host;
}

/**
 * The key the edge signs pool requests with: the signature names its ID, which the
 * pool must hold beside the same secret.
 */
export function poolSigningKeyOf(config: EdgeConfig): SigningKey {
  return { id: config.poolSigningKeyId, secret: config.poolSigningSecret };
}

/**
 * Names the offending var (never its value) so a misconfigured deployment says what
 * to fix: in the operator's log only; callers get a generic 500 (middleware/config.ts).
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

const VAR_NAMES: Record<keyof EdgeConfig, string> = {
  poolUrl: "POOL_URL",
  poolName: "POOL_NAME",
  poolSigningSecret: "POOL_SIGNING_SECRET",
  poolSigningKeyId: "POOL_SIGNING_KEY_ID",
  adminToken: "ADMIN_TOKEN",
  programIdleTtlMs: "PROGRAM_IDLE_TTL_MS",
  maxBodyBytes: "MAX_BODY_BYTES",
  callTimeoutMs: "CALL_TIMEOUT_MS",
  streamStallMs: "STREAM_STALL_MS",
  poolIdleMs: "POOL_IDLE_MS",
};

// Bindings are fixed for the life of an isolate's Env object, so parse once per object.
const cache = new WeakMap<object, EdgeConfig>();

export function edgeConfig(env: Env): EdgeConfig {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = EdgeConfig.safeParse({
    poolUrl: env.POOL_URL,
    poolName: env.POOL_NAME === "" ? undefined : env.POOL_NAME,
    poolSigningSecret: env.POOL_SIGNING_SECRET,
    poolSigningKeyId: env.POOL_SIGNING_KEY_ID === "" ? undefined : env.POOL_SIGNING_KEY_ID,
    adminToken: env.ADMIN_TOKEN === "" ? undefined : env.ADMIN_TOKEN,
    programIdleTtlMs: env.PROGRAM_IDLE_TTL_MS,
    maxBodyBytes: env.MAX_BODY_BYTES,
    callTimeoutMs: env.CALL_TIMEOUT_MS,
    streamStallMs: env.STREAM_STALL_MS,
    poolIdleMs: env.POOL_IDLE_MS,
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = issue.path[0] as keyof EdgeConfig | undefined;
      return `${key ? VAR_NAMES[key] : "config"}: ${issue.message}`;
    });
    throw new ConfigError(`Edge misconfigured: ${problems.join("; ")}`);
  }
  cache.set(env, parsed.data);
  return parsed.data;
}
