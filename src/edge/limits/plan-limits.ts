import { z } from "zod";
import type { Plan, Tenant } from "../db/schema.js";

/**
 * Tool events a tenant may send per minute across all its programs, when its
 * plan row predates the column (the migration's default for existing plans).
 */
export const DEFAULT_TOOL_EVENTS_PER_MINUTE = 6_000;

/** The most TenantLimiter objects one tenant may be split between. */
export const MAX_LIMITER_SHARDS = 64;

/** A tenant's effective limits: its plan's, with its own overrides applied. */
export const TenantLimits = z.object({
  rpm: z.int().positive(),
  tpm: z.int().positive(),
  maxConcurrent: z.int().positive(),
  maxActivePrograms: z.int().positive(),
  /** Tokens per calendar month (UTC); null: no budget. */
  monthlyTokenBudget: z.int().nonnegative().nullable(),
  /** Completion limit of a call that sets none (never above maxOutputTokens). */
  defaultMaxTokens: z.int().positive(),
  /**
   * Largest completion limit a call may ask for (max_tokens / max_completion_tokens);
   * null: no cap of its own (tpm and the budget still bound it). Defaults keep limits
   * rows written before the field existed readable.
   */
  maxOutputTokens: z.int().positive().nullable().default(null),
  /** Tool events per minute across all the tenant's programs (a token bucket in its limiter). */
  toolEventsPerMinute: z.int().positive().default(DEFAULT_TOOL_EVENTS_PER_MINUTE),
  /** TenantLimiter objects the tenant's admissions are split between (limiter/shards.ts); 1: one object. */
  limiterShards: z.int().min(1).max(MAX_LIMITER_SHARDS).default(1),
});
export type TenantLimits = z.infer<typeof TenantLimits>;

export type PlanLimitFields = Pick<
  Plan,
  | "rpm"
  | "tpm"
  | "maxConcurrent"
  | "maxActivePrograms"
  | "monthlyTokenBudget"
  | "defaultMaxTokens"
  | "maxOutputTokens"
  | "toolEventsPerMinute"
  | "limiterShards"
>;

export type TenantOverrideFields = Pick<
  Tenant,
  | "rpmOverride"
  | "tpmOverride"
  | "maxConcurrentOverride"
  | "maxActiveProgramsOverride"
  | "monthlyTokenBudgetOverride"
  | "defaultMaxTokensOverride"
  | "maxOutputTokensOverride"
  | "toolEventsPerMinuteOverride"
  | "limiterShardsOverride"
>;

/** A null override means "the plan's value" (so an override cannot lift a plan's budget to "none"). */
export function effectiveLimits(plan: PlanLimitFields, overrides: TenantOverrideFields): TenantLimits {
  return {
    rpm: overrides.rpmOverride ?? plan.rpm,
    tpm: overrides.tpmOverride ?? plan.tpm,
    maxConcurrent: overrides.maxConcurrentOverride ?? plan.maxConcurrent,
    maxActivePrograms: overrides.maxActiveProgramsOverride ?? plan.maxActivePrograms,
    monthlyTokenBudget: overrides.monthlyTokenBudgetOverride ?? plan.monthlyTokenBudget,
    defaultMaxTokens: overrides.defaultMaxTokensOverride ?? plan.defaultMaxTokens,
    maxOutputTokens: overrides.maxOutputTokensOverride ?? plan.maxOutputTokens,
    toolEventsPerMinute: overrides.toolEventsPerMinuteOverride ?? plan.toolEventsPerMinute,
    limiterShards: overrides.limiterShardsOverride ?? plan.limiterShards,
  };
}

/**
 * The engine extensions a tenant may send (top-level request fields, or
 * `messages.<key>` for a message field): the tenant's list when it has one (it
 * replaces the plan's), else the plan's.
 */
export function effectiveExtensions(
  plan: Pick<Plan, "allowedExtensions">,
  overrides: Pick<Tenant, "allowedExtensionsOverride">,
): string[] {
  return overrides.allowedExtensionsOverride ?? plan.allowedExtensions;
}

const MIN_WEIGHT = 0.001;

/**
 * The weight sent as x-agentix-weight: the plan's weight times the tenant's
 * multiplier, rounded to 1/1000 and at least 0.001, so String() of it never
 * takes exponent form (the pool's header parser, and so the signature, would
 * refuse it).
 */
export function effectiveWeight(planWeight: number, tenantMultiplier: number): number {
  return Math.max(MIN_WEIGHT, Math.round(planWeight * tenantMultiplier * 1000) / 1000);
}
