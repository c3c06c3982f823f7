/*
 * Defaults for the scheduling core. Each is a knob, not a law; why these values:
 *
 * Levels: 10 levels, first bound 1 s, growth 2, i.e. bounds 1, 2, 4, ..., 256 s.
 *   One agent call costs roughly 0.5-3 s of engine time (reference/workloads-and-
 *   engines.md: 34-277 output tokens at ~7-20 ms per decode step), so level 0 holds
 *   new programs and programs after one short call; chat programs (~7 calls) end
 *   around 16-32 s, while LATS tree searches (~160 calls) and long coding agents
 *   reach minutes and sit in the last levels. Doubling keeps the levels coarse: a
 *   program changes level at most 9 times over its life.
 * Starvation: β = 4 with a 2 s floor. A program is promoted once its total queueing
 *   time exceeds four times its service (a queueing slowdown of 5x), and never before
 *   it has queued 8 s in total, so a burst of new programs does not at once promote
 *   every program that has had only a call or two.
 * Tenant half-life 180 s: longer than one agent program (a 30-call agent runs
 *   ~100 s), so a tenant's share averages over its programs' bursts instead of
 *   following them: with 60 s, a tenant using a quarter of the engine still went
 *   behind backlogged tenants whenever several of its programs overlapped, and its
 *   30-call agents took 1.52x their time alone at 56 % of capacity (bench regime
 *   churn); with 180 s 1.28x, with 600 s 1.27x. Three minutes still forgets a burst
 *   soon, not for the rest of the day.
 * Priority value "plas" (attained service): measured, not assumed. Where the queue
 *   does not hold (regimes compute, kv, autellix) PLAS and ATLAS decide nothing and
 *   tie; where it holds (regime starvation) ATLAS keeps a wide tree search at the
 *   critical path of one branch, so its many parallel calls stay ahead of short
 *   programs: ATLAS sustained 0.095 prog/s against PLAS's >= 0.164, with chat's P99
 *   1.7x PLAS's. ATLAS stays a setting.
 * Routing: 2,048-token long-prompt threshold (Autellix), SGLang's imbalance override
 *   (max - min > 32 and max > 1.1 x min).
 * Saturation: the Gateway API Inference Extension treats an engine as saturated at a
 *   waiting queue of 5 or 80 % KV use, hence waiting > 4 or kvUsage > 0.8. With
 *   admission the engine-waiting rule stays a safety limit and the KV one applies only
 *   to engines whose capacity is unknown.
 * Service "work": a call's standalone engine time (cost model × reported usage), the
 *   same unit as wall time at light load (ms of engine time, so the levels and β above
 *   keep their meaning), but it does not grow with how busy the engine was: under wall
 *   time a program's level, and its tenant's share, rose faster exactly when the pool
 *   was loaded, and with whoever else shared the batch.
 * Admission: projected KV within 90 % of capacity (the projection counts every call
 *   at its peak, so the engine itself rarely runs past ~80 %, and its cache keeps room
 *   for prefixes that are about to be read again); decode step within STEP_FACTOR × the
 *   weight-read floor (see below); 256 output tokens expected before anything finished
 *   (the reference's agent calls: 34-277), averaged over ~5 calls (weight 0.2).
 */

import type { AdmissionSettings } from "./admission.js";
import type { DispatchSettings } from "./dispatch.js";
import type { SaturationSettings } from "./engines.js";
import type { QueueSettings } from "./queue.js";
import type { RoutingSettings } from "./routing.js";

export const DEFAULT_QUEUE_SETTINGS: QueueSettings = Object.freeze({
  levels: 10,
  firstBoundMs: 1_000,
  growth: 2,
  priorityValue: "plas",
  starvationRatio: 4,
  starvationMinServiceMs: 2_000,
  tenantHalfLifeMs: 180_000,
});

export const DEFAULT_ROUTING_SETTINGS: RoutingSettings = Object.freeze({
  longPromptTokens: 2_048,
  imbalanceAbs: 32,
  imbalanceRatio: 1.1,
  affinityTurnover: 0.5,
});

export const DEFAULT_SATURATION_SETTINGS: SaturationSettings = Object.freeze({
  maxEngineWaiting: 4,
  maxKvUsage: 0.8,
});

export const DEFAULT_ADMISSION_SETTINGS: AdmissionSettings = Object.freeze({
  kvTarget: 0.9,
  stepTargetFactor: Infinity,
  defaultOutputTokens: 256,
  outputAverageWeight: 0.2,
});

export const DEFAULT_DISPATCH_SETTINGS: DispatchSettings = Object.freeze({
  queue: DEFAULT_QUEUE_SETTINGS,
  routing: DEFAULT_ROUTING_SETTINGS,
  saturation: DEFAULT_SATURATION_SETTINGS,
  admission: DEFAULT_ADMISSION_SETTINGS,
  service: "work",
});

/** The routing settings with the affinity-turnover rule set to `fraction` (null: off), the rest as given. */
export function withAffinityTurnover(routing: RoutingSettings, fraction: number | null): RoutingSettings {
  const changed = { ...routing };
  if (fraction === null) delete changed.affinityTurnover;
  else changed.affinityTurnover = fraction;
  return changed;
}

/**
 * KV-cache capacity assumed for an engine that neither is configured with one nor states
 * it in its metrics (tokens): Llama-3.1-8B on one H100, 26,300 blocks of 16
 * (reference/workloads-and-engines.md, the simulator's default profile). TAO plans in
 * these tokens.
 */
export const DEFAULT_KV_CAPACITY_TOKENS = 420_800;
