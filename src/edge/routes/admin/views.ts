import { z } from "zod";
import { PoolStatus as PoolStatusAnswer } from "../../../protocol/pool-status.js";
import type { PoolStatusReading } from "../../pools/monitor.js";
import { type ApiKey, type Plan, type Pool, POOL_STATUSES, type Tenant } from "../../db/schema.js";
import { effectiveExtensions, effectiveLimits, effectiveWeight } from "../../limits/plan-limits.js";

/**
 * Admin API objects, snake_case like OpenAI's. Each view's return type is its zod
 * schema's (the OpenAPI document, src/edge/openapi/, is generated from the schemas),
 * so a field added to a view without its schema, or the other way round, does not
 * type-check.
 */

const epochMs = z.int().nonnegative().describe("Epoch milliseconds.");
/** Quarantined items GET /admin/tenants/{id}/ledger lists per ledger object. */
export const LEDGER_ITEMS_SHOWN = 100;
const limit = z.int().positive();
const names = z.array(z.string());

export const PlanObject = z.object({
  id: z.string(),
  object: z.literal("plan"),
  name: z.string(),
  rpm: limit,
  tpm: limit,
  max_concurrent: limit,
  max_active_programs: limit,
  monthly_token_budget: z.int().nonnegative().nullable().describe("Tokens a month (UTC); null: no budget."),
  default_max_tokens: limit,
  max_output_tokens: limit.nullable().describe("The largest max_tokens a call may ask for; null: no cap of the plan's own."),
  allowed_extensions: names.describe('Request fields beyond OpenAI\'s the plan\'s tenants may send ("messages.<key>" for a message field).'),
  tool_events_per_minute: limit,
  limiter_shards: limit.describe("TenantLimiter objects a tenant's admissions are split between (1: one)."),
  weight: z.number().positive(),
  allowed_models: names.nullable().describe("null: any model."),
  allowed_regions: names.nullable().describe("null: any region."),
  created_at: epochMs,
  updated_at: epochMs,
});
export type PlanObject = z.output<typeof PlanObject>;

export const planView = (p: Plan): PlanObject => ({
  id: p.id,
  object: "plan" as const,
  name: p.name,
  rpm: p.rpm,
  tpm: p.tpm,
  max_concurrent: p.maxConcurrent,
  max_active_programs: p.maxActivePrograms,
  monthly_token_budget: p.monthlyTokenBudget,
  default_max_tokens: p.defaultMaxTokens,
  max_output_tokens: p.maxOutputTokens,
  allowed_extensions: p.allowedExtensions,
  tool_events_per_minute: p.toolEventsPerMinute,
  limiter_shards: p.limiterShards,
  weight: p.weight,
  /** null: any model / any region. */
  allowed_models: p.allowedModels,
  allowed_regions: p.allowedRegions,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

/** The monitor's last reading of a pool, as the admin API shows it; null: not read yet (or disabled). */
export const PoolHealth = z.object({
  healthy: z.boolean(),
  load: z.number().nonnegative().describe("Calls queued and running per healthy engine."),
  read_at: epochMs,
  error: z.string().optional().describe("Why the read failed; absent when the pool answered."),
  engines: PoolStatusAnswer.shape.engines.optional(),
  queued: z.int().nonnegative().optional(),
  running: z.int().nonnegative().optional(),
  kv_free_tokens: z.int().nonnegative().optional(),
});
export type PoolHealth = z.output<typeof PoolHealth>;

/** A pool directory entry: its signing key by ID only (the secret is a Worker secret). */
export const PoolObject = z.object({
  id: z.string(),
  object: z.literal("pool"),
  region: z.string(),
  url: z.string(),
  models: names,
  weight: z.number().positive(),
  status: z.enum(POOL_STATUSES),
  signing_key_id: z.string(),
  created_at: epochMs,
  updated_at: epochMs,
  health: PoolHealth.nullable().describe("The pool monitor's last reading; null before the first."),
});
export type PoolObject = z.output<typeof PoolObject>;

const readingView = (r: PoolStatusReading | undefined): PoolHealth | null =>
  r === undefined
    ? null
    : {
        healthy: r.healthy,
        load: Math.round(r.load * 100) / 100,
        read_at: r.readAt,
        ...(r.error === undefined ? {} : { error: r.error }),
        ...(r.status === undefined
          ? {}
          : { engines: r.status.engines, queued: r.status.queue.queued, running: r.status.queue.running, kv_free_tokens: r.status.kv.free_tokens }),
      };

export const poolView = (p: Pool, reading?: PoolStatusReading): PoolObject => ({
  id: p.id,
  object: "pool" as const,
  region: p.region,
  url: p.url,
  models: p.models,
  weight: p.weight,
  status: p.status,
  signing_key_id: p.signingKeyId,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
  health: readingView(reading),
});

/** The limits in force for a tenant: its plan's, with its overrides applied. */
export const TenantLimits = z.object({
  rpm: limit,
  tpm: limit,
  max_concurrent: limit,
  max_active_programs: limit,
  monthly_token_budget: z.int().nonnegative().nullable(),
  default_max_tokens: limit,
  max_output_tokens: limit.nullable(),
  allowed_extensions: names,
  tool_events_per_minute: limit,
  limiter_shards: limit,
  weight: z.number().positive().describe("The plan's weight times the tenant's multiplier."),
});
export type TenantLimits = z.output<typeof TenantLimits>;

/** A tenant's overrides of its plan's limits; null: the plan's value. */
export const TenantOverrides = z.object({
  rpm: limit.nullable(),
  tpm: limit.nullable(),
  max_concurrent: limit.nullable(),
  max_active_programs: limit.nullable(),
  monthly_token_budget: z.int().nonnegative().nullable(),
  default_max_tokens: limit.nullable(),
  max_output_tokens: limit.nullable(),
  allowed_extensions: names.nullable(),
  tool_events_per_minute: limit.nullable(),
  limiter_shards: limit.nullable(),
});

export const TenantObject = z.object({
  id: z.string(),
  object: z.literal("tenant"),
  name: z.string(),
  plan: z.string(),
  weight: z.number().positive().describe("Multiplier on the plan's weight."),
  program_inference: z.boolean().describe("Whether calls without x-agentix-program may join a program by their conversation."),
  created_at: epochMs,
  overrides: TenantOverrides,
  limits: TenantLimits.nullable().describe("null when the tenant's plan does not exist."),
});
export type TenantObject = z.output<typeof TenantObject>;

/** A tenant with its overrides and, when its plan is known, the limits in force. */
export const tenantView = (t: Tenant, plan: Plan | null): TenantObject => ({
  id: t.id,
  object: "tenant" as const,
  name: t.name,
  plan: t.planId,
  /** Multiplier on the plan's weight. */
  weight: t.weight,
  program_inference: t.programInference,
  created_at: t.createdAt,
  overrides: {
    rpm: t.rpmOverride,
    tpm: t.tpmOverride,
    max_concurrent: t.maxConcurrentOverride,
    max_active_programs: t.maxActiveProgramsOverride,
    monthly_token_budget: t.monthlyTokenBudgetOverride,
    default_max_tokens: t.defaultMaxTokensOverride,
    max_output_tokens: t.maxOutputTokensOverride,
    allowed_extensions: t.allowedExtensionsOverride,
    tool_events_per_minute: t.toolEventsPerMinuteOverride,
    limiter_shards: t.limiterShardsOverride,
  },
  limits: plan ? limitsView(t, plan) : null,
});

function limitsView(t: Tenant, plan: Plan): TenantLimits {
  const limits = effectiveLimits(plan, t);
  return {
    rpm: limits.rpm,
    tpm: limits.tpm,
    max_concurrent: limits.maxConcurrent,
    max_active_programs: limits.maxActivePrograms,
    monthly_token_budget: limits.monthlyTokenBudget,
    default_max_tokens: limits.defaultMaxTokens,
    max_output_tokens: limits.maxOutputTokens,
    allowed_extensions: effectiveExtensions(plan, t),
    tool_events_per_minute: limits.toolEventsPerMinute,
    limiter_shards: limits.limiterShards,
    weight: effectiveWeight(plan.weight, t.weight),
  };
}

/** An API key as listed: never the key or its hash. */
export const ApiKeyObject = z.object({
  id: z.string(),
  object: z.literal("api_key"),
  tenant_id: z.string(),
  name: z.string().nullable(),
  prefix: z.string().describe("The key's first characters, to tell keys apart."),
  created_at: epochMs,
  revoked_at: epochMs.nullable(),
  last_used_at: epochMs.nullable().describe("Refreshed at most once a minute."),
});
export type ApiKeyObject = z.output<typeof ApiKeyObject>;

/** A key as created: the only answer that shows the key itself. */
export const CreatedApiKeyObject = ApiKeyObject.extend({
  key: z.string().describe("The API key (agx_…). Shown only in this answer: store it now."),
});

export const keyView = (k: ApiKey): ApiKeyObject => ({
  id: k.id,
  object: "api_key" as const,
  tenant_id: k.tenantId,
  name: k.name,
  prefix: k.prefix,
  created_at: k.createdAt,
  revoked_at: k.revokedAt,
  last_used_at: k.lastUsedAt,
});

// ---- A tenant's usage ledger (GET /admin/tenants/{id}/ledger) ----------------------

const itemCount = z.int().nonnegative();

export const LedgerShardObject = z.object({
  shard: z.int().nonnegative().describe("The ledger object's index (0: the tenant's one object)."),
  pending_rows: itemCount,
  pending_summaries: itemCount,
  oldest_pending_at: epochMs.nullable().describe("When the oldest pending item began waiting (its call's settle); null: none."),
  quarantined_rows: itemCount.describe("Usage rows D1 refused: not in the figures until it takes them."),
  quarantined_summaries: itemCount.describe("Program rows D1 refused."),
  quarantined_since: epochMs.nullable().describe("When the oldest quarantined item was first refused; null: none."),
});

export const LedgerQuarantinedObject = z.object({
  shard: z.int().nonnegative(),
  kind: z.enum(["usage", "program"]).describe("usage: a call's usage row (id: the call ID); program: a program's row (id: the program ID)."),
  id: z.string(),
  program_id: z.string(),
  since: epochMs.describe("When D1 first refused it."),
  attempts: z.int().positive(),
  next_attempt_at: epochMs.describe("When it is tried again (at once when the ledger writes its program's row)."),
  last_error: z.string().describe("D1's error at the last attempt."),
});

export const TenantLedgerObject = z.object({
  object: z.literal("tenant.ledger"),
  tenant_id: z.string(),
  shards: z.array(LedgerShardObject),
  quarantined: z.array(LedgerQuarantinedObject).describe(`Oldest first, at most ${LEDGER_ITEMS_SHOWN} per ledger object.`),
});
export type TenantLedgerObject = z.output<typeof TenantLedgerObject>;
