import { z } from "zod";
import type { Plan, Tenant } from "../db/schema.js";

/** A tenant's effective limits: its plan's, with its own overrides applied. */
export const TenantLimits = z.object({
  rpm: z.int().positive(),
  tpm: z.int().positive(),
  maxConcurrent: z.int().positive(),
  maxActivePrograms: z.int().positive(),
  /** Tokens per calendar month (UTC); null: no budget. */
  monthlyTokenBudget: z.int().nonnegative().nullable(),
  defaultMaxTokens: z.int().positive(),
});
export type TenantLimits = z.infer<typeof TenantLimits>;

export type PlanLimitFields = Pick<
  Plan,
  "rpm" | "tpm" | "maxConcurrent" | "maxActivePrograms" | "monthlyTokenBudget" | "defaultMaxTokens"
>;

export type TenantOverrideFields = Pick<
  Tenant,
  | "rpmOverride"
  | "tpmOverride"
  | "maxConcurrentOverride"
  | "maxActiveProgramsOverride"
  | "monthlyTokenBudgetOverride"
  | "defaultMaxTokensOverride"
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
  };
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

/** Tokens reserved for a call at admission: its prompt estimate plus the completion it may produce. */
export function reservationFor(promptEstimate: number, requestedMaxTokens: number | undefined, limits: TenantLimits): number {
  return promptEstimate + (requestedMaxTokens ?? limits.defaultMaxTokens);
}
