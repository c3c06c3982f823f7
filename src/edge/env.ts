import { z } from "zod";
import { DEFAULT_SIGNING_KEY_ID, type SigningKey, SigningKeyId, SigningSecret } from "../protocol/signing.js";
import type { TenantLimiter } from "./limiter/tenant-limiter.js";
import type { UsageLedger } from "./ledger/usage-ledger.js";
import type { PoolMonitor } from "./pools/monitor.js";
import { RegionOrderTable } from "./pools/pool-choice.js";
import type { ProgramSession } from "./program/session.js";
import type { ProgramIndex } from "./recognition/program-index.js";

/** The Worker's bindings, as wrangler.toml and `wrangler secret put` provide them. */
export interface Env {
  DB: D1Database;
  PROGRAM_SESSION: DurableObjectNamespace<ProgramSession>;
  TENANT_LIMITER: DurableObjectNamespace<TenantLimiter>;
  POOL_MONITOR: DurableObjectNamespace<PoolMonitor>;
  PROGRAM_INDEX: DurableObjectNamespace<ProgramIndex>;
  /** One per tenant: its programs' usage rows on their way to D1 (ledger/usage-ledger.ts). */
  USAGE_LEDGER: DurableObjectNamespace<UsageLedger>;
  /** JSON object: signing key ID → secret; a pool row's signing_key_id names one. */
  POOL_SIGNING_KEYS?: string;
  /** One more key (a single-pool deployment's): its secret, by POOL_SIGNING_KEY_ID. */
  POOL_SIGNING_SECRET?: string;
  /** The ID POOL_SIGNING_SECRET goes by; unset: "default". */
  POOL_SIGNING_KEY_ID?: string;
  /** JSON object: client continent (request.cf.continent) → pool regions, nearest first. */
  REGION_ORDER?: string;
  /** How often the pools' status is read (ms). */
  POOL_STATUS_INTERVAL_MS?: string;
  /** A request header whose value names a client's session (its calls join one program); unset: none. */
  PROGRAM_KEY_HEADER?: string;
  /** Unset: the admin API is disabled. Under 32 characters (or too few distinct ones): refused at use. */
  ADMIN_TOKEN?: string;
  PROGRAM_IDLE_TTL_MS?: string;
  MAX_BODY_BYTES?: string;
  CALL_TIMEOUT_MS?: string;
  STREAM_STALL_MS?: string;
  POOL_IDLE_MS?: string;
  /** How long a settled call's usage row may wait in its tenant's ledger before the batch to D1 (ms; 0: at settle). */
  LEDGER_FLUSH_MS?: string;
  /** "1": the call path before issue 14 (D1 auth per request, admission then begin), for bench:edge's baseline only. */
  EDGE_BASELINE_HOT_PATH?: string;
  /** "1": each program writes its own rows to D1 (no tenant ledger), for bench:edge --ledger's baseline only. */
  EDGE_BASELINE_PROGRAM_LEDGER?: string;
  /** "1": count Durable Object calls and D1 queries per request (bench:edge); see instrument/io-counts.ts. */
  COUNT_IO?: string;
}

const positiveInt = z.coerce.number().int().positive();

/** A var holding JSON: parsed, then checked against `schema`. */
const jsonVar = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .transform((raw, ctx) => {
      try {
        return JSON.parse(raw) as unknown;
      } catch {
        ctx.addIssue({ code: "custom", message: "is not valid JSON" });
        return z.NEVER;
      }
    })
    .pipe(schema);

/** The vars the edge needs, parsed from their string form once per Env object. */
export const EdgeConfig = z
  .object({
    /** Signing key ID → secret (POOL_SIGNING_KEYS, plus POOL_SIGNING_SECRET by POOL_SIGNING_KEY_ID). */
    poolSigningKeys: jsonVar(z.record(SigningKeyId, SigningSecret)).optional(),
    poolSigningSecret: SigningSecret.optional(),
    poolSigningKeyId: SigningKeyId.default(DEFAULT_SIGNING_KEY_ID),
    regionOrder: jsonVar(RegionOrderTable).optional(),
    /** At least 1 s: each round reads every pool's status. */
    poolStatusIntervalMs: positiveInt.min(1_000).default(5_000),
    /** A header name, lower case (HTTP header names are case-insensitive). */
    programKeyHeader: z
      .string()
      .regex(/^[A-Za-z0-9-]{1,64}$/, "a header name: letters, digits and -")
      .transform((name) => name.toLowerCase())
      .optional(),
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
    /**
     * Usage rows wait at most this long after their settle (in their tenant's ledger,
     * ledger/usage-ledger.ts) before one batch takes them to D1 (ledger/flush-schedule.ts);
     * 0 writes each at its settle. At most 10 s, so GET /v1/usage is never much further
     * behind than that while D1 answers (usage/freshness.ts).
     */
    ledgerFlushMs: z.coerce.number().int().nonnegative().max(10_000).default(5_000),
    /** bench:edge's baseline: the pre-issue-14 call path (see EDGE_BASELINE_HOT_PATH). */
    baselineHotPath: z.enum(["0", "1"]).default("0").transform((flag) => flag === "1"),
    /** bench:edge --ledger's baseline: programs batch their own rows to D1 (see EDGE_BASELINE_PROGRAM_LEDGER). */
    baselineProgramLedger: z.enum(["0", "1"]).default("0").transform((flag) => flag === "1"),
  })
  .transform(({ poolSigningKeys, poolSigningSecret, poolSigningKeyId, regionOrder, ...rest }) => ({
    ...rest,
    /** Every key the edge can sign with, by ID. */
    signingKeys: {
      ...poolSigningKeys,
      ...(poolSigningSecret === undefined ? {} : { [poolSigningKeyId]: poolSigningSecret }),
    } as Readonly<Record<string, string>>,
    regionOrder: regionOrder ?? {},
  }))
  .refine((config) => Object.keys(config.signingKeys).length > 0, {
    message: "no signing key: set POOL_SIGNING_KEYS (JSON: key ID → secret) or POOL_SIGNING_SECRET",
    path: ["poolSigningKeys"],
  });
export type EdgeConfig = z.output<typeof EdgeConfig>;

/**
 * The key the edge signs a pool's requests with: the one its directory row names
 * (the pool holds the same ID and secret). Undefined when the edge holds no such key.
 */
export function signingKeyFor(config: EdgeConfig, keyId: string): SigningKey | undefined {
  const secret = Object.hasOwn(config.signingKeys, keyId) ? config.signingKeys[keyId] : undefined;
  return secret === undefined ? undefined : { id: keyId, secret };
}

/**
 * Names the offending var (never its value) so a misconfigured deployment says what
 * to fix: in the operator's log only; callers get a generic 500 (middleware/config.ts).
 */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

const VAR_NAMES: Record<keyof z.input<typeof EdgeConfig>, string> = {
  poolSigningKeys: "POOL_SIGNING_KEYS",
  poolSigningSecret: "POOL_SIGNING_SECRET",
  poolSigningKeyId: "POOL_SIGNING_KEY_ID",
  regionOrder: "REGION_ORDER",
  poolStatusIntervalMs: "POOL_STATUS_INTERVAL_MS",
  programKeyHeader: "PROGRAM_KEY_HEADER",
  adminToken: "ADMIN_TOKEN",
  programIdleTtlMs: "PROGRAM_IDLE_TTL_MS",
  maxBodyBytes: "MAX_BODY_BYTES",
  callTimeoutMs: "CALL_TIMEOUT_MS",
  streamStallMs: "STREAM_STALL_MS",
  poolIdleMs: "POOL_IDLE_MS",
  ledgerFlushMs: "LEDGER_FLUSH_MS",
  baselineHotPath: "EDGE_BASELINE_HOT_PATH",
  baselineProgramLedger: "EDGE_BASELINE_PROGRAM_LEDGER",
};

/** An empty var is an unset one (wrangler.toml cannot unset a var per environment). */
const unlessEmpty = (value: string | undefined) => (value === "" ? undefined : value);

// Bindings are fixed for the life of an isolate's Env object, so parse once per object.
const cache = new WeakMap<object, EdgeConfig>();

export function edgeConfig(env: Env): EdgeConfig {
  const cached = cache.get(env);
  if (cached) return cached;
  const parsed = EdgeConfig.safeParse({
    poolSigningKeys: unlessEmpty(env.POOL_SIGNING_KEYS),
    poolSigningSecret: unlessEmpty(env.POOL_SIGNING_SECRET),
    poolSigningKeyId: unlessEmpty(env.POOL_SIGNING_KEY_ID),
    regionOrder: unlessEmpty(env.REGION_ORDER),
    poolStatusIntervalMs: env.POOL_STATUS_INTERVAL_MS,
    programKeyHeader: unlessEmpty(env.PROGRAM_KEY_HEADER),
    adminToken: env.ADMIN_TOKEN === "" ? undefined : env.ADMIN_TOKEN,
    programIdleTtlMs: env.PROGRAM_IDLE_TTL_MS,
    maxBodyBytes: env.MAX_BODY_BYTES,
    callTimeoutMs: env.CALL_TIMEOUT_MS,
    streamStallMs: env.STREAM_STALL_MS,
    poolIdleMs: env.POOL_IDLE_MS,
    ledgerFlushMs: unlessEmpty(env.LEDGER_FLUSH_MS),
    baselineHotPath: unlessEmpty(env.EDGE_BASELINE_HOT_PATH),
    baselineProgramLedger: unlessEmpty(env.EDGE_BASELINE_PROGRAM_LEDGER),
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const key = issue.path[0] as keyof typeof VAR_NAMES | undefined;
      return `${key ? VAR_NAMES[key] : "config"}: ${issue.message}`;
    });
    throw new ConfigError(`Edge misconfigured: ${problems.join("; ")}`);
  }
  cache.set(env, parsed.data);
  return parsed.data;
}
