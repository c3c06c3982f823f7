import { z } from "zod";
import type { CacheCreditSettings, PlannerSettings, ReadinessSettings, TaoSettings } from "../../core/tao/settings.js";
import { DEFAULT_HOLD_LEFT_OUT_MS, DEFAULT_TAO_SETTINGS, validateTaoSettings } from "../../core/tao/settings.js";

/*
 * `scheduling.placement` and `scheduling.tao` of the pool config. The placement policy
 * decides WHERE a call runs: "routing" (default) is the core's routing rule, call by
 * call, as before TAO; "tao" places with the TAO planner (see tao-placement.ts). The
 * readiness predictor and the cache-credit ledger are fed in both modes (so their
 * metrics and the inspection route tell what TAO would know before it is switched on);
 * only "tao" lets them decide placement. Core knobs override the core's defaults field
 * by field and are checked by the core's own validators.
 */

export const PLACEMENT_POLICIES = ["routing", "tao"] as const;
export type PlacementPolicy = (typeof PLACEMENT_POLICIES)[number];

const ReadinessOverrides = z.strictObject({
  readySoonMs: z.number().optional(),
  fallbackMs: z.number().optional(),
  maxPredictionAgeMs: z.number().optional(),
  toolHistorySize: z.int().optional(),
  globalHistorySize: z.int().optional(),
  minHistorySamples: z.int().optional(),
  maxTools: z.int().optional(),
  errorToleranceMs: z.number().optional(),
}) satisfies z.ZodType<Partial<ReadinessSettings>>;

const CacheCreditOverrides = z.strictObject({
  halfLifeMs: z.number().optional(),
  retentionAlpha: z.number().optional(),
  minCalibrationTokens: z.number().optional(),
}) satisfies z.ZodType<Partial<CacheCreditSettings>>;

const PlannerOverrides = z.strictObject({
  quantumTokens: z.int().optional(),
  stateBudget: z.int().optional(),
  planTtlMs: z.number().optional(),
}) satisfies z.ZodType<Partial<PlannerSettings>>;

/** The pool's TAO settings: the core's, plus when to plan and how long to hold a reservation. */
export interface PoolTaoSettings {
  core: TaoSettings;
  /**
   * Period of the background planning round (ms): time alone changes a plan (a tool
   * phase enters the readiness horizon, a reservation runs out), so plan at least this
   * often while anything is queued or between calls.
   */
  planIntervalMs: number;
  /** Least time between two plans (ms): under a stream of events, plans coalesce to this rate. */
  replanMinIntervalMs: number;
  /** Longest a reservation holds its engine slot (ms); 0 makes none. */
  reservationTtlMs: number;
  /**
   * Longest a program the plan left out for want of KV waits before it is routed
   * anyway (ms); 0 routes it at once (no KV admission control).
   */
  holdLeftOutMs: number;
  /** KV tokens counted per call beyond its prompt (its output), in plans and the engines' KV estimate. */
  outputAllowanceTokens: number;
}

export interface PlacementSettings {
  policy: PlacementPolicy;
  tao: PoolTaoSettings;
}

export const TaoConfig = z
  .strictObject({
    readiness: ReadinessOverrides.default({}),
    cacheCredit: CacheCreditOverrides.default({}),
    planner: PlannerOverrides.default({}),
    planIntervalMs: z.int().min(10).max(60_000).default(250),
    replanMinIntervalMs: z.int().min(0).max(10_000).default(10),
    /** Default: the readiness horizon + 500 ms (a call predicted at the horizon's edge still finds its slot). */
    reservationTtlMs: z.int().min(0).max(60_000).optional(),
    holdLeftOutMs: z.int().min(0).max(600_000).default(DEFAULT_HOLD_LEFT_OUT_MS),
    outputAllowanceTokens: z.int().min(0).max(1_000_000).default(256),
  })
  .prefault({})
  .transform((overrides, ctx): PoolTaoSettings => {
    const core: TaoSettings = {
      readiness: { ...DEFAULT_TAO_SETTINGS.readiness, ...overrides.readiness },
      cacheCredit: { ...DEFAULT_TAO_SETTINGS.cacheCredit, ...overrides.cacheCredit },
      planner: { ...DEFAULT_TAO_SETTINGS.planner, ...overrides.planner },
    };
    try {
      validateTaoSettings(core);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
    return {
      core,
      planIntervalMs: overrides.planIntervalMs,
      replanMinIntervalMs: overrides.replanMinIntervalMs,
      reservationTtlMs: overrides.reservationTtlMs ?? core.readiness.readySoonMs + 500,
      holdLeftOutMs: overrides.holdLeftOutMs,
      outputAllowanceTokens: overrides.outputAllowanceTokens,
    };
  });

export const PlacementPolicyConfig = z.enum(PLACEMENT_POLICIES).default("routing");
