/*
 * Settings of TAO (tool- and cache-aware placement). Each is a knob, not a law; why
 * these values:
 *
 * Readiness horizon 1 s: a program whose next call is due within one planning
 *   horizon is worth holding capacity for; beyond that the capacity is better used now.
 * Fallback guess 5 s: the coding-agent tool gap has a heavy tail (TraceLab p50 0.3 s,
 *   p90 13.6 s) and web tools a median of 1.3 s; 5 s is "probably not within the
 *   horizon", so a program we know nothing about is not reserved for.
 * Predictions older than 30 s are dropped: a tool that has run that long is in the
 *   tail, where the old estimate says nothing.
 * History: the median of the last 32 durations per tool (robust to the lognormal
 *   tail, unlike a mean), used from 3 samples on; at most 512 tool names are kept,
 *   least recently updated forgotten first, since tool names come from clients.
 * Cache credit half-life 10 s: vLLM evicts cached prefix blocks LRU under load; a
 *   context idle for a few tool gaps is likely gone.
 * Retention EWMA weight 0.2: an engine's reported cached_tokens calibrate how much of
 *   the predicted credit it really keeps (0 for an engine without prefix caching).
 * Quantum Δ = 4,096 tokens (256 vLLM blocks of 16): coarse enough that a nearly full
 *   engine has a handful of quanta, so the exact DP runs when capacity is scarce.
 * State budget 200,000 (candidates × Π(quanta + 1)): the DP costs about
 *   (engines + 1) steps per state, so this keeps one plan in low milliseconds
 *   (see `npm run bench:planner`).
 * Plan lifetime 1 s: one readiness horizon; after it, re-plan rather than apply.
 */

export interface ReadinessSettings {
  /** A program is "ready soon" when its next call is expected within this (ms). */
  readySoonMs: number;
  /** Guess when nothing else is known (ms). */
  fallbackMs: number;
  /** A prediction whose latest evidence is older than this is dropped (ms). */
  maxPredictionAgeMs: number;
  /** Recent durations kept per tool. */
  toolHistorySize: number;
  /** Recent durations kept across all tools. */
  globalHistorySize: number;
  /** A history is used once it holds at least this many durations. */
  minHistorySamples: number;
  /** At most this many tool names are tracked (least recently updated dropped). */
  maxTools: number;
  /** |predicted - actual| within this counts as accurate in the error report (ms). */
  errorToleranceMs: number;
}

export interface CacheCreditSettings {
  halfLifeMs: number;
  /** EWMA weight of each cached_tokens report in an engine's retention (0..1]. */
  retentionAlpha: number;
  /** A report calibrates retention only when the predicted credit was at least this (tokens). */
  minCalibrationTokens: number;
}

export interface PlannerSettings {
  /** Δ: capacities are floored to, and demands rounded up to, multiples of this (tokens). */
  quantumTokens: number;
  /** Largest DP state space (candidates × Π over engines of (quanta + 1)); above it, best-fit-decreasing. */
  stateBudget: number;
  /** A plan older than this is stale as a whole (ms). */
  planTtlMs: number;
}

export interface TaoSettings {
  readiness: ReadinessSettings;
  cacheCredit: CacheCreditSettings;
  planner: PlannerSettings;
}

/**
 * How long a program the plan left out for want of KV waits for a plan to place it
 * before routing may take it (ms; TaoPump's holdLeftOutMs), still only where admission's
 * KV account has room. The plan places programs by cache credit, so a context whose
 * credit has decayed could be left out plan after plan; the bound hands it to routing.
 * Chosen with `npm run bench:tao -- --hold-ms …` (README, TAO section).
 */
export const DEFAULT_HOLD_LEFT_OUT_MS = 45_000;

/** The DP's tables are allocated up front; this bounds their size (bytes ~ budget). */
export const MAX_STATE_BUDGET = 50_000_000;

export const DEFAULT_READINESS_SETTINGS: ReadinessSettings = Object.freeze({
  readySoonMs: 1_000,
  fallbackMs: 5_000,
  maxPredictionAgeMs: 30_000,
  toolHistorySize: 32,
  globalHistorySize: 128,
  minHistorySamples: 3,
  maxTools: 512,
  errorToleranceMs: 500,
});

export const DEFAULT_CACHE_CREDIT_SETTINGS: CacheCreditSettings = Object.freeze({
  halfLifeMs: 10_000,
  retentionAlpha: 0.2,
  minCalibrationTokens: 256,
});

export const DEFAULT_PLANNER_SETTINGS: PlannerSettings = Object.freeze({
  quantumTokens: 4_096,
  stateBudget: 200_000,
  planTtlMs: 1_000,
});

export const DEFAULT_TAO_SETTINGS: TaoSettings = Object.freeze({
  readiness: DEFAULT_READINESS_SETTINGS,
  cacheCredit: DEFAULT_CACHE_CREDIT_SETTINGS,
  planner: DEFAULT_PLANNER_SETTINGS,
});

function positiveFinite(name: string, value: number): void {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a finite number > 0, got ${value}`);
}

function nonNegativeFinite(name: string, value: number): void {
  if (!Number.isFinite(value) || value < 0) throw new RangeError(`${name} must be a finite number >= 0, got ${value}`);
}

function positiveInteger(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be an integer >= 1, got ${value}`);
}

export function validateReadinessSettings(s: ReadinessSettings): void {
  nonNegativeFinite("readySoonMs", s.readySoonMs);
  nonNegativeFinite("fallbackMs", s.fallbackMs);
  positiveFinite("maxPredictionAgeMs", s.maxPredictionAgeMs);
  positiveInteger("toolHistorySize", s.toolHistorySize);
  positiveInteger("globalHistorySize", s.globalHistorySize);
  positiveInteger("minHistorySamples", s.minHistorySamples);
  positiveInteger("maxTools", s.maxTools);
  nonNegativeFinite("errorToleranceMs", s.errorToleranceMs);
  if (s.minHistorySamples > s.toolHistorySize || s.minHistorySamples > s.globalHistorySize) {
    throw new RangeError("minHistorySamples must not exceed toolHistorySize or globalHistorySize");
  }
}

export function validateCacheCreditSettings(s: CacheCreditSettings): void {
  positiveFinite("halfLifeMs", s.halfLifeMs);
  if (!(s.retentionAlpha > 0 && s.retentionAlpha <= 1)) {
    throw new RangeError(`retentionAlpha must be in (0, 1], got ${s.retentionAlpha}`);
  }
  nonNegativeFinite("minCalibrationTokens", s.minCalibrationTokens);
}

export function validatePlannerSettings(s: PlannerSettings): void {
  if (!Number.isInteger(s.quantumTokens) || s.quantumTokens < 1) {
    throw new RangeError(`quantumTokens must be an integer >= 1, got ${s.quantumTokens}`);
  }
  if (!Number.isInteger(s.stateBudget) || s.stateBudget < 0 || s.stateBudget > MAX_STATE_BUDGET) {
    throw new RangeError(`stateBudget must be an integer in [0, ${MAX_STATE_BUDGET}], got ${s.stateBudget}`);
  }
  positiveFinite("planTtlMs", s.planTtlMs);
}

export function validateTaoSettings(s: TaoSettings): void {
  validateReadinessSettings(s.readiness);
  validateCacheCreditSettings(s.cacheCredit);
  validatePlannerSettings(s.planner);
}

/**
 * TAO placement as the pool core runs it (pool and simulator alike): the planner's
 * inputs, and how long what it decides is held.
 */
export interface TaoPlacementSettings {
  tao: TaoSettings;
  /** Longest a reservation holds its engine slot (ms); 0 makes none. */
  reservationTtlMs: number;
  /**
   * Longest a program the plan left out for want of KV waits before it is routed
   * anyway (ms, through admission's KV account); 0 routes it at once, Infinity until promoted.
   */
  holdLeftOutMs: number;
  /** KV tokens a planned call needs beyond its prompt (its output). */
  outputAllowanceTokens: number;
}

/**
 * A call's output in a plan: 256 tokens (the coding agent's outputs: mean 164, p99 ~600;
 * the reference's agent calls 34-277).
 */
export const DEFAULT_OUTPUT_ALLOWANCE_TOKENS = 256;

/** Defaults; a reservation lasts the readiness horizon + 500 ms, so a call predicted at the horizon's edge still finds its slot. */
export function defaultTaoPlacementSettings(tao: TaoSettings = DEFAULT_TAO_SETTINGS): TaoPlacementSettings {
  return { tao, reservationTtlMs: tao.readiness.readySoonMs + 500, holdLeftOutMs: DEFAULT_HOLD_LEFT_OUT_MS, outputAllowanceTokens: DEFAULT_OUTPUT_ALLOWANCE_TOKENS };
}

export function validateTaoPlacementSettings(s: TaoPlacementSettings): void {
  validateTaoSettings(s.tao);
  nonNegativeFinite("reservationTtlMs", s.reservationTtlMs);
  if (Number.isNaN(s.holdLeftOutMs) || s.holdLeftOutMs < 0) throw new RangeError(`holdLeftOutMs must be >= 0 (Infinity: until promoted), got ${s.holdLeftOutMs}`);
  nonNegativeFinite("outputAllowanceTokens", s.outputAllowanceTokens);
}
