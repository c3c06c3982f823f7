import { readFile } from "node:fs/promises";
import { z } from "zod";
import { type DispatchSettings, SERVICE_MEASURES, validateDispatchSettings } from "../core/dispatch.js";
import type { AdmissionSettings, DecodeCostModel } from "../core/admission.js";
import type { SaturationSettings } from "../core/engines.js";
import type { QueueSettings } from "../core/queue.js";
import type { RoutingSettings } from "../core/routing.js";
import { DEFAULT_DISPATCH_SETTINGS, DEFAULT_KV_CAPACITY_TOKENS, withAffinityTurnover } from "../core/settings.js";
import { DEFAULT_SIGNING_KEY_ID, SigningKey, SigningSecret } from "../protocol/signing.js";
import { decodeCostOf, ENGINE_PROFILES, isEngineProfileName } from "../sim/profiles.js";
import { KV_LINKS } from "../sim/kv-links.js";
import { DEFAULT_ROLE_ROUND_MS, ENGINE_ROLES, ROLE_SWITCH_MODES } from "../core/roles/roles.js";
import { adapterFor, ENGINE_KINDS, SPLIT_ENGINE_KINDS } from "./engines/index.js";
import { NATIVE_APIS } from "./engine-request.js";
import { type PlacementSettings, PlacementPolicyConfig, TaoConfig } from "./tao/config.js";

/*
 * The pool's configuration: a JSON file (path from the CLI or AGENTIX_POOL_CONFIG)
 * with PORT, the signing keys (POOL_SIGNING_SECRET and POOL_SIGNING_KEY_ID, or
 * POOL_SIGNING_KEYS) and AGENTIX_POOL_OPERATOR_TOKEN from the environment taking
 * precedence. Unknown keys are errors, so a misspelt knob is
 * caught instead of silently defaulted.
 * Scheduling knobs override the core's defaults field by field; their ranges are
 * checked by the core's own validators (one source of truth for the rules).
 */

const ENGINE_ID = /^[\w.:-]{1,64}$/;

/** An engine's count cap unless configured: calls the pool keeps on it at once. */
const DEFAULT_ENGINE_MAX_IN_FLIGHT = 64;

/** What an engine does with KV retention hints: takes Agentix's ("agentix") or none. */
export const RETENTION_HINT_MODES = ["agentix", "none"] as const;
export type RetentionHintMode = (typeof RETENTION_HINT_MODES)[number];

/** KV capacity of an engine that states none (tokens); precedence: the engine's configured kvCapacityTokens, else its metrics', else this. */
export { DEFAULT_KV_CAPACITY_TOKENS };

const costTerm = z.number().min(0).max(10_000);
const DecodeCostConfig = z.strictObject({
  decodeBaseMs: costTerm,
  perTokenMs: costTerm,
  perContextTokenMs: costTerm,
  perSequenceMs: costTerm,
}) satisfies z.ZodType<DecodeCostModel>;

export const EngineConfig = z
  .strictObject({
    id: z.string().regex(ENGINE_ID, "engine id: 1–64 of letters, digits, _ . : -"),
    /** Base URL of the engine's HTTP server, without `/v1`. */
    url: z.url({ protocol: /^https?$/, error: "engine url must be an http(s) URL" }).transform((u) => u.replace(/\/+$/, "")),
    kind: z.enum(ENGINE_KINDS).default("vllm"),
    /**
     * Most calls the pool keeps on this engine at once. It must not cap the engine's
     * batch: the simulator showed a cap of 4 cut tree-search capacity to a quarter of
     * plain vLLM's (`npm run bench:calibrate -- --buffer N`). The engine's own queue is
     * kept short by the saturation rule (waiting > 4 or KV > 80 %), so the pool still
     * holds the real queue.
     */
    maxInFlight: z.int().positive().max(10_000).optional(),
    /**
     * The engine's batch: most sequences it runs at once (vLLM's --max-num-seqs, SGLang's
     * --max-running-requests). A split call's decode is held at it, not at the small
     * buffer a new call is held at: a decode engine runs its whole batch. Unset: an
     * explicit maxInFlight caps decodes too, else the named profile's batch, else 64.
     */
    maxNumSeqs: z.int().positive().max(100_000).optional(),
    apiKey: z.string().min(1).optional(),
    /** Model name sent to the engine instead of the client's. */
    model: z.string().min(1).optional(),
    /** Defaults by kind: /health (vLLM, SGLang), /v1/models (openai). */
    healthPath: z.string().startsWith("/").optional(),
    /** Defaults by kind: /metrics (vLLM, SGLang), none (openai); null turns scraping off. */
    metricsPath: z.string().startsWith("/").nullable().optional(),
    /**
     * KV-cache capacity in tokens (vLLM: num_gpu_blocks × block_size), for TAO placement.
     * Unset: read from the engine's metrics when they state it, else DEFAULT_KV_CAPACITY_TOKENS.
     */
    kvCapacityTokens: z.int().positive().max(1_000_000_000).optional(),
    /**
     * The engine's decode cost, for admission by step time: a named profile of
     * published figures (model and GPU, src/sim/profiles.ts) or the terms themselves.
     * Unset: no step-time rule for this engine (KV and the safety limits still apply).
     */
    profile: z
      .string()
      .refine(isEngineProfileName, { error: `profile: one of ${Object.keys(ENGINE_PROFILES).join(", ")}` })
      .optional(),
    decodeCost: DecodeCostConfig.optional(),
    /**
     * The APIs besides chat completions and completions the engine is sent in their own
     * shape (engine-request.ts): "messages" (vLLM and SGLang serve /v1/messages),
     * "responses" (vLLM, SGLang and OpenAI serve /v1/responses). Unset: none; such calls
     * go as chat completions and their answers are translated back, which keeps the
     * engine's priority field and per-chunk usage (vLLM's /v1/messages takes neither).
     */
    nativeApis: z
      .array(z.enum(NATIVE_APIS))
      .max(NATIVE_APIS.length)
      .refine((apis) => new Set(apis).size === apis.length, { error: "nativeApis: each API once" })
      .default([]),
    /**
     * Whether the engine takes Agentix's KV retention hints (protocol/kv-retention.ts): each
     * call's body tagged with its context, keep/normal/drop batches POSTed to its
     * KV_RETENTION_PATH. "agentix": the simulated engine, or a real one behind a plugin that
     * reads them; "none" (default): stock vLLM, SGLang and OpenAI-compatible servers have no
     * per-request retention API (README "KV retention signals").
     */
    retentionHints: z.enum(RETENTION_HINT_MODES).default("none"),
    /**
     * Its role in disaggregated serving (issue 13): "mixed" (default) serves calls whole;
     * a "prefill" engine computes a call's prompt and hands its KV to a "decode" engine,
     * which generates the answer. Only vLLM (KV connector, kv_transfer_params) and SGLang
     * (PD mode, bootstrap) split a call.
     */
    role: z.enum(ENGINE_ROLES).default("mixed"),
    /** SGLang's --disaggregation-bootstrap-port of a prefill engine (SGLang's default 8998). */
    bootstrapPort: z.int().min(1).max(65_535).default(8998),
    /**
     * How it switches roles (issue 13): "overlap" (vLLM's default: an engine started
     * kv_both serves either side, so it takes its new role at once while its old role's
     * calls finish) or "drain" (nothing new until its calls are done: a vLLM engine
     * started kv_producer or kv_consumer, and SGLang, whose --disaggregation-mode is fixed
     * at start). Unset: its kind's default.
     */
    roleSwitch: z.enum(ROLE_SWITCH_MODES).optional(),
  })
  .refine((engine) => engine.profile === undefined || engine.decodeCost === undefined, {
    error: "give an engine a profile or a decodeCost, not both",
  })
  .refine((engine) => engine.role === "mixed" || SPLIT_ENGINE_KINDS.includes(engine.kind), {
    error: `only ${SPLIT_ENGINE_KINDS.join(" and ")} engines can take a prefill or decode role`,
    path: ["role"],
  })
  .refine((engine) => engine.roleSwitch !== "overlap" || adapterFor(engine.kind).roleSwitch === "overlap", {
    error: "roleSwitch overlap needs an engine that serves both sides (vLLM started kv_both); an SGLang PD server's side is fixed at start: drain",
    path: ["roleSwitch"],
  })
  .transform((engine) => {
    const adapter = adapterFor(engine.kind);
    const { profile, decodeCost, maxNumSeqs, ...rest } = engine;
    const named = profile !== undefined && isEngineProfileName(profile) ? ENGINE_PROFILES[profile] : undefined;
    return {
      ...rest,
      maxInFlight: engine.maxInFlight ?? DEFAULT_ENGINE_MAX_IN_FLIGHT,
      /** The cap on decodes it takes: its stated batch, else an explicit maxInFlight, else its profile's batch, else the default count cap. */
      maxDecodes: maxNumSeqs ?? engine.maxInFlight ?? named?.maxNumSeqs ?? DEFAULT_ENGINE_MAX_IN_FLIGHT,
      healthPath: engine.healthPath ?? adapter.healthPath,
      roleSwitch: engine.roleSwitch ?? adapter.roleSwitch,
      metricsPath: engine.metricsPath === undefined ? adapter.metricsPath : (engine.metricsPath ?? undefined),
      decodeCost: decodeCost ?? (named === undefined ? undefined : decodeCostOf(named)),
      /** A named profile states the capacity too, unless configured. */
      kvCapacityTokens: engine.kvCapacityTokens ?? (named === undefined ? undefined : named.kvBlocks * named.blockSize),
      /** A named profile's KV link (a split call's expected transfer, handoff-estimate.ts); undefined: its conservative default. */
      kvLink: profile !== undefined && isEngineProfileName(profile) ? KV_LINKS[profile] : undefined,
    };
  });
export type EngineConfig = z.output<typeof EngineConfig>;

const QueueOverrides = z.strictObject({
  levels: z.int().optional(),
  firstBoundMs: z.number().optional(),
  growth: z.number().optional(),
  priorityValue: z.enum(["plas", "atlas"]).optional(),
  starvationRatio: z.number().optional(),
  starvationMinServiceMs: z.number().optional(),
  tenantHalfLifeMs: z.number().optional(),
}) satisfies z.ZodType<Partial<QueueSettings>>;

const RoutingOverrides = z.strictObject({
  /** "affinity" (default), or a baseline the benchmark compares it with: "least-loaded", "round-robin". */
  policy: z.enum(["affinity", "least-loaded", "round-robin"]).optional(),
  longPromptTokens: z.number().optional(),
  imbalanceAbs: z.number().optional(),
  imbalanceRatio: z.number().optional(),
  /**
   * A long call's hint to its program's engine is dropped once that engine computed more
   * than this × its KV capacity since the program's call left it (core/kv/affinity-turnover.ts);
   * null: hints are always kept.
   */
  affinityTurnover: z.number().nullable().optional(),
}) satisfies z.ZodType<Partial<Omit<RoutingSettings, "affinityTurnover">> & { affinityTurnover?: number | null | undefined }>;

const SaturationOverrides = z.strictObject({
  maxEngineWaiting: z.number().optional(),
  maxKvUsage: z.number().optional(),
}) satisfies z.ZodType<Partial<SaturationSettings>>;

const AdmissionOverrides = z.strictObject({
  /** false: no pool-side admission; the count cap and scraped saturation alone decide. */
  enabled: z.boolean().default(true),
  kvTarget: z.number().optional(),
  stepTargetMs: z.number().optional(),
  stepTargetFactor: z.number().optional(),
  defaultOutputTokens: z.int().optional(),
  outputAverageWeight: z.number().optional(),
}) satisfies z.ZodType<Partial<AdmissionSettings> & { enabled: boolean }>;

const SchedulingConfig = z
  .strictObject({
    queue: QueueOverrides.default({}),
    routing: RoutingOverrides.default({}),
    saturation: SaturationOverrides.default({}),
    admission: AdmissionOverrides.default({ enabled: true }),
    /** What a call's service counts: "work" (default: standalone engine time from the engine's cost model and usage) or "wall". */
    service: z.enum(SERVICE_MEASURES).optional(),
    /** Where calls run: "routing" (default, the core's routing rule) or "tao" (TAO placement plans). */
    placement: PlacementPolicyConfig,
    tao: TaoConfig,
  })
  .prefault({})
  .transform((overrides, ctx): { dispatch: DispatchSettings; placement: PlacementSettings } => {
    const settings: DispatchSettings = {
      queue: { ...DEFAULT_DISPATCH_SETTINGS.queue, ...overrides.queue },
      routing: routingSettings(overrides.routing),
      saturation: { ...DEFAULT_DISPATCH_SETTINGS.saturation, ...overrides.saturation },
      admission: admissionSettings(overrides.admission),
      service: overrides.service ?? DEFAULT_DISPATCH_SETTINGS.service,
    };
    try {
      validateDispatchSettings(settings);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
    return { dispatch: settings, placement: { policy: overrides.placement, tao: overrides.tao } };
  });

function routingSettings(overrides: z.output<typeof RoutingOverrides>): RoutingSettings {
  const { affinityTurnover, ...given } = overrides;
  const routing: RoutingSettings = { ...DEFAULT_DISPATCH_SETTINGS.routing, ...given };
  return affinityTurnover === undefined ? routing : withAffinityTurnover(routing, affinityTurnover);
}

function admissionSettings(overrides: z.output<typeof AdmissionOverrides>): AdmissionSettings | undefined {
  const { enabled, ...given } = overrides;
  if (!enabled) return undefined;
  const defaults = DEFAULT_DISPATCH_SETTINGS.admission as AdmissionSettings;
  return { ...defaults, ...Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)) };
}

/** The role controller: "off" (default) keeps the configured roles; "ratio" (Agentix's) or "threshold" (the Dynamo-like baseline) moves engines. */
const RolesConfig = z
  .strictObject({
    controller: z.enum(["off", "ratio", "threshold"]).default("off"),
    /** How often the controller looks at the demand (ms). */
    roundMs: z.int().min(100).max(600_000).default(DEFAULT_ROLE_ROUND_MS),
    /** No switch within this long of the last (ms); the controller's own default when unset. */
    cooldownMs: z.int().min(0).max(3_600_000).optional(),
  })
  .prefault({});
export type RolesConfig = z.output<typeof RolesConfig>;

const DEFAULT_TIMESTAMP_WINDOW_MS = 30_000;

/** One key, or two while a secret rotates: the edge signs with either, the pool accepts both. */
const SigningKeys = z
  .array(SigningKey)
  .min(1, "signingKeys: at least one key")
  .max(2, "signingKeys: at most two keys (the current one and, while rotating, the other)")
  .refine((keys) => new Set(keys.map((key) => key.id)).size === keys.length, "signingKeys: key ids must be unique");

export const PoolConfig = z
  .strictObject({
    host: z.string().min(1).default("127.0.0.1"),
    /** 0 picks a free port. */
    port: z.int().min(0).max(65_535).default(8100),
    /**
     * The HMAC keys shared with the edge, `{ id, secret }`: the edge's signature names
     * the one it used. Two while rotating: add the new key, move the edge to it, drop the old.
     */
    signingKeys: SigningKeys.optional(),
    /** Legacy form of a single key, whose id is "default"; give this or signingKeys, not both. */
    signingSecret: SigningSecret.optional(),
    /**
     * Bearer token of the operator endpoints: /metrics, /health's detail, /tao/*.
     * Unset: they answer 403 and /health only says ok or degraded.
     */
    operatorToken: z.string().min(32, "operatorToken must be at least 32 characters").optional(),
    /** Largest accepted |now − x-agentix-ts|. */
    timestampWindowMs: z.int().positive().default(DEFAULT_TIMESTAMP_WINDOW_MS),
    /** How long a call ID is remembered; at least 2 × timestampWindowMs (default exactly that). */
    replayWindowMs: z.int().positive().optional(),
    /** Most call IDs remembered at once; beyond it new calls are refused (503), never let through. */
    replayCapacity: z.int().positive().default(200_000),
    // The edge's 16 MiB plus room for what it adds when it re-serialises a body (the effective max_tokens).
    maxBodyBytes: z.int().positive().default(17 * 1024 * 1024),
    /**
     * Model names a call may ask for; any other is refused 404 model_not_found before it
     * is queued. Unset: any name, which an engine without its own `model` receives as
     * sent (a tenant could then name any model or LoRA adapter that engine serves).
     */
    models: z.array(z.string().min(1).max(256)).min(1).optional(),
    engines: z
      .array(EngineConfig)
      .min(1, "at least one engine is required")
      .refine((engines) => new Set(engines.map((e) => e.id)).size === engines.length, "engine ids must be unique")
      .refine((engines) => !engines.some((e) => e.role === "prefill") || engines.some((e) => e.role === "decode"), "a pool with prefill engines needs at least one decode engine")
      .refine((engines) => !engines.some((e) => e.role === "decode") || engines.some((e) => e.role !== "decode"), "a pool with decode engines needs a prefill or mixed engine to start calls on")
      .refine(
        (engines) => new Set(engines.filter((e) => e.role !== "mixed").map((e) => e.kind)).size <= 1,
        "prefill and decode engines must be of one kind (vLLM's kv_transfer_params and SGLang's bootstrap do not meet)",
      ),
    scheduling: SchedulingConfig,
    /** Live role switches (issue 13): which controller of src/core/roles moves engines between prefill and decode. */
    roles: RolesConfig,
    /** Period of the /health and /metrics probe of every engine. */
    metricsIntervalMs: z.int().min(10).default(500),
    /**
     * Period of the probe of an engine whose last metrics were over the saturation
     * limits: the pool holds calls back on that reading, so it is re-read this soon
     * (50 ms: the Gateway API Inference Extension's scrape period).
     */
    saturatedMetricsIntervalMs: z.int().min(10).default(50),
    /** Timeout of one probe request. */
    probeTimeoutMs: z.int().positive().default(2_000),
    /** Consecutive failed health probes before an engine is taken out of rotation. */
    unhealthyAfterFailures: z.int().positive().default(2),
    /** Extra attempts on another engine when one fails before its first byte. */
    retries: z.int().min(0).max(10).default(2),
    /** Headers and body inactivity timeout of an engine request (a long generation may take minutes). */
    upstreamTimeoutMs: z.int().positive().default(600_000),
    /** Queue bound; beyond it calls are refused with 503 + Retry-After. */
    maxQueuedCalls: z.int().positive().default(10_000),
    /** With no healthy engine for this long, queued calls fail and new ones are refused (503). */
    noHealthyEngineGraceMs: z.int().min(0).default(10_000),
    /** Retry-After (s) on 503 answers. */
    retryAfterSeconds: z.int().positive().default(5),
  })
  .superRefine(
    ({ signingKeys, signingSecret }, ctx) => {
      if ((signingKeys === undefined) !== (signingSecret === undefined)) return;
      ctx.addIssue({
        code: "custom",
        path: ["signingKeys"],
        message:
          signingKeys === undefined
            ? "signingKeys (or the legacy signingSecret) is required"
            : "give signingKeys or the legacy signingSecret, not both",
      });
    },
    // Also beside other problems, so a config missing its keys says so at once.
    { when: (payload) => typeof payload.value === "object" && payload.value !== null },
  )
  .superRefine(({ roles, engines }, ctx) => {
    if (roles.controller === "off") return;
    const split = engines.filter((engine) => engine.role !== "mixed");
    if (!split.some((e) => e.role === "prefill") || !split.some((e) => e.role === "decode")) {
      ctx.addIssue({ code: "custom", path: ["roles", "controller"], message: "a role controller moves engines between prefill and decode: give the pool prefill and decode engines" });
    } else if (!split.some((e) => e.decodeCost !== undefined)) {
      ctx.addIssue({ code: "custom", path: ["roles", "controller"], message: "a role controller prices demand by the engines' cost model: give the prefill and decode engines a profile or a decodeCost" });
    }
  })
  .transform((config, ctx) => {
    const replayWindowMs = config.replayWindowMs ?? 2 * config.timestampWindowMs;
    if (replayWindowMs < 2 * config.timestampWindowMs) {
      ctx.addIssue({
        code: "custom",
        path: ["replayWindowMs"],
        message: `replayWindowMs must be at least 2 × timestampWindowMs (${2 * config.timestampWindowMs}), or a replay could pass`,
      });
      return z.NEVER;
    }
    const { signingSecret, ...rest } = config;
    // (Never []: the refinement above requires one of the two forms.)
    const legacyKey = signingSecret === undefined ? [] : [{ id: DEFAULT_SIGNING_KEY_ID, secret: signingSecret }];
    const signingKeys: SigningKey[] = config.signingKeys ?? legacyKey;
    // `scheduling` stays the core's DispatchSettings; the placement policy sits beside it.
    const { dispatch, placement } = config.scheduling;
    return { ...rest, signingKeys, replayWindowMs, scheduling: dispatch, placement };
  });
export type PoolConfig = z.output<typeof PoolConfig>;
export type PoolConfigInput = z.input<typeof PoolConfig>;

export class PoolConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PoolConfigError";
  }
}

/** Validates a config object; throws PoolConfigError listing every problem. */
export function parsePoolConfig(input: unknown, source = "pool config"): PoolConfig {
  const parsed = PoolConfig.safeParse(input);
  if (!parsed.success) throw new PoolConfigError(`Invalid ${source}:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

export interface LoadPoolConfigOptions {
  /** JSON file; defaults to env.AGENTIX_POOL_CONFIG. Without either, the config comes from env alone. */
  path?: string | undefined;
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * The signing keys the environment sets, replacing the file's: POOL_SIGNING_SECRET
 * (with POOL_SIGNING_KEY_ID, default "default") for one key, or POOL_SIGNING_KEYS, a
 * JSON array of `{ id, secret }`, for one or two. Undefined when it sets none.
 */
function signingKeysFromEnv(env: Readonly<Record<string, string | undefined>>): unknown {
  const { POOL_SIGNING_SECRET: secret, POOL_SIGNING_KEY_ID: keyId, POOL_SIGNING_KEYS: keys } = env;
  if (secret && keys) throw new PoolConfigError("Set POOL_SIGNING_SECRET or POOL_SIGNING_KEYS, not both");
  if (keyId && !secret) throw new PoolConfigError("POOL_SIGNING_KEY_ID names the key of POOL_SIGNING_SECRET, which is not set");
  if (secret) return [{ id: keyId || DEFAULT_SIGNING_KEY_ID, secret }];
  if (!keys) return undefined;
  try {
    return JSON.parse(keys);
  } catch {
    // Never echo the value: it holds secrets.
    throw new PoolConfigError('POOL_SIGNING_KEYS is not valid JSON: it must be an array of {"id": …, "secret": …}');
  }
}

/** File, then PORT, the signing keys and AGENTIX_POOL_OPERATOR_TOKEN from the environment on top. */
export async function loadPoolConfig(options: LoadPoolConfigOptions = {}): Promise<PoolConfig> {
  const env = options.env ?? process.env;
  const path = options.path ?? env.AGENTIX_POOL_CONFIG;
  let fileConfig: unknown = {};
  const isRecord = (value: unknown): value is Record<string, unknown> =>
    typeof value === "object" && value !== null && !Array.isArray(value);
  if (path) {
    let text: string;
    try {
      text = await readFile(path, "utf8");
    } catch (error) {
      throw new PoolConfigError(`Cannot read pool config ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
    try {
      fileConfig = JSON.parse(text);
    } catch (error) {
      throw new PoolConfigError(`Pool config ${path} is not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (!isRecord(fileConfig)) throw new PoolConfigError(`Pool config ${path} must hold a JSON object`);
  const merged: Record<string, unknown> = { ...fileConfig };
  if (env.PORT !== undefined && env.PORT !== "") {
    const port = Number(env.PORT);
    if (!Number.isInteger(port)) throw new PoolConfigError(`PORT must be an integer, got ${JSON.stringify(env.PORT)}`);
    merged.port = port;
  }
  const envKeys = signingKeysFromEnv(env);
  if (envKeys !== undefined) {
    delete merged.signingSecret;
    merged.signingKeys = envKeys;
  }
  if (env.AGENTIX_POOL_OPERATOR_TOKEN) merged.operatorToken = env.AGENTIX_POOL_OPERATOR_TOKEN;
  return parsePoolConfig(merged, path ? `pool config ${path}` : "pool config (from environment)");
}
