import { z } from "zod";
import { TenantLimits } from "../limits/plan-limits.js";

/*
 * The TenantLimiter RPC contract. Inputs are zod schemas because the object
 * parses them itself (a NaN must never reach a bucket). Times are ms since the
 * epoch from the caller's clock; limits travel with every admission, so a plan
 * change applies from the tenant's next request.
 */

const ms = z.number().finite().nonnegative();
const id = z.string().min(1);

export const AdmitCallInput = z.object({
  callId: id,
  now: ms,
  limits: TenantLimits,
  /** Prompt estimate + max completion tokens: held against tpm and the budget until the call settles. */
  reserveTokens: z.int().nonnegative(),
  /** Set when this call also starts a program: checked against maxActivePrograms. */
  newProgramId: id.optional(),
});
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

export const RenewLeaseInput = z.object({ callId: id, now: ms });
export type RenewLeaseInput = z.infer<typeof RenewLeaseInput>;

export const PeekInput = z.object({ now: ms, limits: TenantLimits });
export type PeekInput = z.infer<typeof PeekInput>;

export const ReleaseProgramInput = z.object({ programId: id });
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
  | "budget_exhausted"
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
  /** What was left (tokens or slots), where that matters. */
  available?: number;
}

export type AdmitResult =
  | { ok: true; snapshot: LimiterSnapshot; leaseExpiresAt: number }
  | { ok: false; refusal: Refusal; snapshot: LimiterSnapshot }
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
