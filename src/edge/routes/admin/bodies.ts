import { z } from "zod";

/** Admin bodies are tiny; this caps them independently of MAX_BODY_BYTES. */
export const ADMIN_BODY_BYTES = 16 * 1024;

export const PLAN_ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;

const planId = z.string().regex(PLAN_ID, "must be 1–32 lowercase letters, digits, _ or -, starting with a letter or digit");
const name = z.string().trim().min(1).max(200);
// Bounded so String(weight) never takes exponent form in the signed x-agentix-weight header.
const weight = z.number().finite().min(0.001).max(1_000);
const count = (max: number) => z.int().positive().max(max);
const tokens = z.int().nonnegative().max(1e15);

const LIMITS = {
  rpm: count(1e7),
  tpm: count(1e12),
  max_concurrent: count(1e6),
  max_active_programs: count(1e9),
  monthly_token_budget: tokens.nullable(),
  default_max_tokens: count(1e7),
};

export const CreatePlanBody = z.strictObject({
  id: planId,
  name,
  ...LIMITS,
  weight: weight.default(1),
});

export const UpdatePlanBody = z
  .strictObject({
    name: name.optional(),
    rpm: LIMITS.rpm.optional(),
    tpm: LIMITS.tpm.optional(),
    max_concurrent: LIMITS.max_concurrent.optional(),
    max_active_programs: LIMITS.max_active_programs.optional(),
    monthly_token_budget: LIMITS.monthly_token_budget.optional(),
    default_max_tokens: LIMITS.default_max_tokens.optional(),
    weight: weight.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one field to change");

export const CreateTenantBody = z.strictObject({
  name,
  weight: weight.optional(),
  plan: planId.optional(),
});

export const UpdateTenantBody = z
  .strictObject({ name: name.optional(), weight: weight.optional(), plan: planId.optional() })
  .refine((body) => Object.keys(body).length > 0, "give at least one field to change");

/** Each field: a number overrides the plan, null goes back to the plan's value, absent leaves it as is. */
export const TenantOverridesBody = z
  .strictObject({
    rpm: LIMITS.rpm.nullable().optional(),
    tpm: LIMITS.tpm.nullable().optional(),
    max_concurrent: LIMITS.max_concurrent.nullable().optional(),
    max_active_programs: LIMITS.max_active_programs.nullable().optional(),
    monthly_token_budget: tokens.nullable().optional(),
    default_max_tokens: LIMITS.default_max_tokens.nullable().optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one override (a number, or null to clear)");

export const CreateKeyBody = z.strictObject({
  name: name.optional(),
});
