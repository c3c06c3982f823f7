import type { TenantLimits } from "./plan-limits.js";

/*
 * A call's effective completion limit: what the edge reserves AND what it tells the
 * engine (max_tokens / max_completion_tokens in the forwarded body), so the
 * reservation covers everything the engine may produce. Pure; the TenantLimiter runs
 * it inside the admission transaction with the period's figures.
 */

export interface OutputTokensInput {
  /** The call's prompt estimate (tokens). */
  promptTokens: number;
  /** What the client asked for (max_completion_tokens ?? max_tokens); undefined: nothing. */
  requested: number | undefined;
  limits: Pick<TenantLimits, "defaultMaxTokens" | "maxOutputTokens" | "monthlyTokenBudget">;
  /** Tokens settled in the current period. */
  settled: number;
  /** Tokens still reserved by calls in flight in the current period. */
  held: number;
}

export type OutputTokensDecision =
  | { ok: true; maxTokens: number }
  | { ok: false; reason: "max_tokens_above_plan"; limit: number; requested: number }
  | {
      ok: false;
      reason: "budget_exhausted" | "budget_held" | "max_tokens_exceeds_budget";
      limit: number;
      /** The completion limit the call would have had. */
      requested: number;
      /** Budget this call may reserve now: budget − settled − held (may be < 0 after an overspend). */
      available: number;
      held: number;
      /** The largest max_tokens admitted now, 0 if none. */
      fits: number;
    };

/** The plan's default for a call that sets no limit: never above the plan's maximum. */
export function defaultOutputTokens(limits: Pick<TenantLimits, "defaultMaxTokens" | "maxOutputTokens">): number {
  return limits.maxOutputTokens === null ? limits.defaultMaxTokens : Math.min(limits.defaultMaxTokens, limits.maxOutputTokens);
}

/** A requested limit above the plan's maximum, or undefined when it is allowed. Stateless: the edge checks it before admission too. */
export function aboveOutputCap(requested: number | undefined, limits: Pick<TenantLimits, "maxOutputTokens">): number | undefined {
  if (requested === undefined || limits.maxOutputTokens === null) return undefined;
  return requested > limits.maxOutputTokens ? limits.maxOutputTokens : undefined;
}

/**
 * Decides the completion limit, in this order:
 * 1. a requested limit above the plan's max_output_tokens: refused (400);
 * 2. no budget: the requested limit, else the plan default;
 * 3. a budget: `available` = budget − settled − held.
 *    - requested m: admitted when prompt + m ≤ available. Otherwise: when the budget
 *      cannot hold prompt + 1 token even if every call in flight gave back all it holds
 *      (budget − settled < prompt + 1), the budget is spent (budget_exhausted, 429 until
 *      the period ends); when prompt + m can never fit this period (> budget − settled),
 *      the request is too large for what is left (max_tokens_exceeds_budget, 400, saying
 *      what fits); else it fits once calls in flight settle (budget_held, 429, short retry).
 *    - no limit requested: the plan default clamped to available − prompt, if that is ≥ 1;
 *      else budget_exhausted or budget_held as above.
 */
export function decideOutputTokens(input: OutputTokensInput): OutputTokensDecision {
  const { promptTokens, requested, limits, settled, held } = input;
  const cap = aboveOutputCap(requested, limits);
  if (requested !== undefined && cap !== undefined) return { ok: false, reason: "max_tokens_above_plan", limit: cap, requested };
  const wanted = requested ?? defaultOutputTokens(limits);
  const budget = limits.monthlyTokenBudget;
  if (budget === null) return { ok: true, maxTokens: wanted };

  const available = budget - settled - held;
  const fits = Math.max(0, available - promptTokens);
  if (requested === undefined && fits >= 1) return { ok: true, maxTokens: Math.min(wanted, fits) };
  if (promptTokens + wanted <= available) return { ok: true, maxTokens: wanted };

  const refusal = { ok: false as const, limit: budget, requested: wanted, available, held, fits };
  const unheld = budget - settled;
  if (unheld < promptTokens + 1) return { ...refusal, reason: "budget_exhausted" };
  if (requested !== undefined && promptTokens + requested > unheld) return { ...refusal, reason: "max_tokens_exceeds_budget" };
  return { ...refusal, reason: "budget_held" };
}
