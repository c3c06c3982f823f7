import { z } from "zod";
import {
  type CacheCreditSettings,
  DEFAULT_TAO_SETTINGS,
  defaultTaoPlacementSettings,
  type PlannerSettings,
  type ReadinessSettings,
  type TaoPlacementSettings,
  type TaoSettings,
  validateTaoPlacementSettings,
} from "../../core/tao/settings.js";

/*
 * `scheduling.placement` and `scheduling.tao` of the pool config. The placement policy
 * decides WHERE a call runs: "routing" (default) is the core's routing rule, call by
 * call, as before TAO; "tao" places with the TAO planner (core/tao/tao-placement.ts). The
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

/** The pool's TAO settings: the core's placement settings, plus when its plan loop runs. */
export interface PoolTaoSettings extends TaoPlacementSettings {
  /**
   * Period of the background planning round (ms): time alone changes a plan (a tool
   * phase enters the readiness horizon, a reservation runs out), so plan at least this
   * often while anything is queued or between calls.
   */
  planIntervalMs: number;
  /** Least time between two plans (ms): under a stream of events, plans coalesce to this rate. */
  replanMinIntervalMs: number;
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
    holdLeftOutMs: z.int().min(0).max(600_000).optional(),
    outputAllowanceTokens: z.int().min(0).max(1_000_000).optional(),
  })
  .prefault({})
  .transform((overrides, ctx): PoolTaoSettings => {
    const tao: TaoSettings = {
      readiness: { ...DEFAULT_TAO_SETTINGS.readiness, ...overrides.readiness },
      cacheCredit: { ...DEFAULT_TAO_SETTINGS.cacheCredit, ...overrides.cacheCredit },
      planner: { ...DEFAULT_TAO_SETTINGS.planner, ...overrides.planner },
    };
    // The core's defaults, field by field (one source for pool and simulator).
    const defaults = defaultTaoPlacementSettings(tao);
    const settings: PoolTaoSettings = {
      tao,
      reservationTtlMs: overrides.reservationTtlMs ?? defaults.reservationTtlMs,
      holdLeftOutMs: overrides.holdLeftOutMs ?? defaults.holdLeftOutMs,
      outputAllowanceTokens: overrides.outputAllowanceTokens ?? defaults.outputAllowanceTokens,
      planIntervalMs: overrides.planIntervalMs,
      replanMinIntervalMs: overrides.replanMinIntervalMs,
    };
    try {
      validateTaoPlacementSettings(settings);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: error instanceof Error ? error.message : String(error) });
      return z.NEVER;
    }
    return settings;
  });

export const PlacementPolicyConfig = z.enum(PLACEMENT_POLICIES).default("routing");
