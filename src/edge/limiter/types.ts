import { z } from "zod";
import type { AuthenticatedTenant } from "../context.js";
import { TenantLimits } from "../limits/plan-limits.js";

/*
 * The TenantLimiter RPC contract. Inputs are zod schemas because the object
 * parses them itself (a NaN must never reach a bucket). Times are ms since the
 * epoch from the caller's clock; limits travel with every admission, so a plan
 * change applies from the tenant's next request.
 */

const ms = z.number().finite().nonnegative();
const id = z.string().min(1);

/** A key presented for the tenant this object is named by (the tenant ID names the object; the hash proves the key). */
export const KeyCredential = z.object({ tenantId: id, keyHash: id });
export type KeyCredential = z.infer<typeof KeyCredential>;

export const AuthenticateInput = KeyCredential.extend({ now: ms });
export type AuthenticateInput = z.infer<typeof AuthenticateInput>;

export const RefreshProfileInput = z.object({ tenantId: id });
export type RefreshProfileInput = z.infer<typeof RefreshProfileInput>;

export const AdmitCallInput = z
  .object({
  callId: id,
  now: ms,
  /** The limits to admit by, when the caller authenticated the tenant itself (tests, tools); else `auth`. */
  limits: TenantLimits.optional(),
  /**
   * The key to verify in the same step, and the profile version the caller's checks used
   * (its isolate's cached copy): a different version is refused as profile_changed,
   * with the current profile, before anything is taken. The limits are then this object's own.
   */
  auth: KeyCredential.extend({ profileVersion: z.int().nonnegative() }).optional(),
  /** The prompt estimate (tokens). */
  promptTokens: z.int().nonnegative(),
  /** The completion limit the client asked for (max_completion_tokens ?? max_tokens); absent: none. */
  maxTokens: z.int().positive().optional(),
  /** Set when this call also starts a program: checked against maxActivePrograms (shard 0 only, on a sharded tenant). */
  newProgramId: id.optional(),
  /**
   * A sharded tenant (shards.ts): which shard of how many this object is. It admits by its
   * share of rpm, tpm and concurrency and reserves against the budget shard 0 granted it.
   */
  shard: z.object({ tenantId: id, index: z.int().min(0).max(63), count: z.int().min(2).max(64) }).optional(),
})
  .refine((input) => (input.limits === undefined) !== (input.auth === undefined), "exactly one of limits and auth");
export type AdmitCallInput = z.infer<typeof AdmitCallInput>;

export const AdmitProgramInput = z.object({ programId: id, now: ms, limits: TenantLimits });
export type AdmitProgramInput = z.infer<typeof AdmitProgramInput>;

export const SettleLeaseInput = z.object({
  callId: id,
  /** What the call actually used: prompt + completion tokens. */
  tokens: z.int().nonnegative(),
  /** Settle time: the tokens count in this time's billing period. */
  finishedAt: ms,
});
export type SettleLeaseInput = z.infer<typeof SettleLeaseInput>;

export const CancelLeaseInput = z.object({
  callId: id,
  now: ms,
  /** The program admitted with the call, when it was never created: frees its slot too. */
  releaseProgramId: id.optional(),
});
export type CancelLeaseInput = z.infer<typeof CancelLeaseInput>;

/** A shard asks shard 0 for budget (shards.ts): at least `need` tokens of `budget` for `period`, if that many are left. */
export const GrantBudgetInput = z.object({
  period: z.string().regex(/^\d{4}-\d{2}$/),
  shard: z.int().min(0).max(63),
  count: z.int().min(2).max(64),
  need: z.int().positive(),
  budget: z.int().nonnegative(),
});
export type GrantBudgetInput = z.infer<typeof GrantBudgetInput>;

export const RenewLeaseInput = z.object({ callId: id, now: ms });

export const WasAdmittedInput = z.object({ callId: id });
export type WasAdmittedInput = z.infer<typeof WasAdmittedInput>;
export type RenewLeaseInput = z.infer<typeof RenewLeaseInput>;

export const PeekInput = z.object({ now: ms, limits: TenantLimits });
export type PeekInput = z.infer<typeof PeekInput>;

export const ReleaseProgramInput = z.object({ programId: id });

export const AdmitToolEventsInput = z.object({
  now: ms,
  limits: TenantLimits,
  /** Events in the batch: taken from the tenant's tool-event bucket all at once, or not at all. */
  count: z.int().positive(),
});
export type AdmitToolEventsInput = z.infer<typeof AdmitToolEventsInput>;
export type ReleaseProgramInput = z.infer<typeof ReleaseProgramInput>;

/** One rate limit as OpenAI's headers show it. */
export interface RateStatus {
  limit: number;
  remaining: number;
  /** ms until it is back to its full value. */
  resetMs: number;
}

export interface LimiterSnapshot {
  requests: RateStatus;
  tokens: RateStatus;
  budget: {
    /** null: no budget. */
    limit: number | null;
    /** Settled tokens in the current period plus reservations still held there. */
    committed: number;
    period: string;
    periodEndMs: number;
  };
  inFlight: number;
  activePrograms: number;
}

export type RefusalReason =
  /** The budget cannot hold even the prompt and one completion token, whatever settles: 429 until the period ends. */
  | "budget_exhausted"
  /** The budget's rest is held by calls in flight; it may come back when they settle: 429, short Retry-After. */
  | "budget_held"
  /** The requested completion limit does not fit what is left of the budget (not even once calls in flight settle): 400. */
  | "max_tokens_exceeds_budget"
  /** The requested completion limit is above the plan's max_output_tokens: 400. */
  | "max_tokens_above_plan"
  | "request_exceeds_tokens_per_minute"
  | "concurrency_limit"
  | "active_programs_limit"
  | "requests_per_minute"
  | "tokens_per_minute";

export interface Refusal {
  reason: RefusalReason;
  /** ms until a retry can succeed (for the budget: until the period ends). */
  retryAfterMs: number;
  /** The limit that was hit. */
  limit: number;
  /** What the call asked for (tokens), where that matters. */
  requested?: number;
  /** What was left (tokens or slots), where that matters; for the budget: what this call may reserve now. */
  available?: number;
  /** The call's prompt estimate, for budget refusals. */
  promptTokens?: number;
  /** Budget tokens held by calls in flight, for budget refusals. */
  held?: number;
  /** The largest max_tokens that would be admitted now (0: none), for budget refusals. */
  fits?: number;
}

/** Why a key was not accepted: a wrong or revoked key, or an unknown tenant (all answered alike); a tenant whose plan row is missing. */
export type AuthRefusal = { ok: false; refusal: "invalid_key" } | { ok: false; refusal: "plan_missing"; planId: string };

export type AuthenticateResult =
  | {
      ok: true;
      tenant: AuthenticatedTenant;
      version: number;
      /** The key's last use was over a minute ago: the caller refreshes api_keys.last_used_at. */
      keyUsed: boolean;
    }
  | AuthRefusal;

export type RefreshProfileResult = { ok: true; version: number; /** The most shards the tenant ever had (shard 0's answer): the admin API reloads them all. */ shards: number } | { ok: false; reason: "not_found" | "plan_missing" };

export type AdmitResult =
  | {
      ok: true;
      /** With `auth`: the key's last use was over a minute ago (api_keys.last_used_at is due). */
      keyUsed?: boolean;
      snapshot: LimiterSnapshot;
      leaseExpiresAt: number;
      /**
       * The call's effective completion limit, decided in the same transaction as its
       * reservation: the request's, else the plan default (≤ max_output_tokens), clamped
       * to what the budget still holds when the client set none. The edge sends exactly
       * this to the engine, so the reservation covers what the engine may produce.
       */
      maxTokens: number;
      /** promptTokens + maxTokens: held against tpm and the budget until the call settles. */
      reservedTokens: number;
    }
  | { ok: false; refusal: Refusal; snapshot: LimiterSnapshot }
  | { ok: false; refusal: "invalid_input"; detail: string }
  | AuthRefusal
  /** The caller checked the call against an older profile: nothing was taken; check again with this one. */
  | { ok: false; refusal: "profile_changed"; tenant: AuthenticatedTenant; version: number };

export type AdmitToolEventsResult =
  | { ok: true; remaining: number }
  | { ok: false; retryAfterMs: number; limitPerMinute: number }
  | { ok: false; refusal: "invalid_input"; detail: string };

export type AdmitProgramResult =
  | { ok: true }
  | { ok: false; refusal: Refusal }
  | { ok: false; refusal: "invalid_input"; detail: string };

export type SettleLeaseResult =
  | { settled: true; expired: boolean }
  | { settled: false; reason: "unknown_call" | "already_settled" }
  | { settled: false; reason: "invalid_input"; detail: string };

export type CancelLeaseResult =
  | { cancelled: true; snapshot: LimiterSnapshot | null }
  | { cancelled: false; reason: "unknown_call" | "not_active" | "invalid_input"; snapshot: LimiterSnapshot | null };
