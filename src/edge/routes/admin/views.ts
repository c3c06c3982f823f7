import type { PoolStatusReading } from "../../pools/monitor.js";
import type { ApiKey, Plan, Pool, Tenant } from "../../db/schema.js";
import { effectiveExtensions, effectiveLimits, effectiveWeight } from "../../limits/plan-limits.js";

/** Admin API objects, snake_case like OpenAI's. */

export const planView = (p: Plan) => ({
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
  weight: p.weight,
  /** null: any model / any region. */
  allowed_models: p.allowedModels,
  allowed_regions: p.allowedRegions,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

/** A pool directory entry: its signing key by ID only (the secret is a Worker secret). */
/** The monitor's last reading of a pool, as the admin API shows it; null: not read yet (or disabled). */
const readingView = (r: PoolStatusReading | undefined) =>
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

export const poolView = (p: Pool, reading?: PoolStatusReading) => ({
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

/** A tenant with its overrides and, when its plan is known, the limits in force. */
export const tenantView = (t: Tenant, plan: Plan | null) => ({
  id: t.id,
  object: "tenant" as const,
  name: t.name,
  plan: t.planId,
  /** Multiplier on the plan's weight. */
  weight: t.weight,
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
  },
  limits: plan ? limitsView(t, plan) : null,
});

function limitsView(t: Tenant, plan: Plan) {
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
    weight: effectiveWeight(plan.weight, t.weight),
  };
}

export const keyView = (k: ApiKey) => ({
  id: k.id,
  object: "api_key" as const,
  tenant_id: k.tenantId,
  name: k.name,
  prefix: k.prefix,
  created_at: k.createdAt,
  revoked_at: k.revokedAt,
  last_used_at: k.lastUsedAt,
});
