import { enginesToMove, type RoleController, type RoleDecision, type RoleDemand, type RoleEngineState, splitOf } from "./roles.js";

/*
 * The baseline the benchmark compares the ratio controller with: a load-threshold
 * planner in the manner of NVIDIA Dynamo's (it scales prefill workers on the prefill
 * queue and decode workers on decode KV-cache use, each against a high and a low
 * threshold, once per adjustment interval). Here the pool's engine count is fixed, so
 * "add a prefill worker" is "move a decode engine to prefill" and the other way round,
 * one engine per interval.
 */

export interface ThresholdControllerSettings {
  /** Waiting prefill calls per prefill engine above which prefill wants an engine, and below which it may give one. */
  prefillQueueHigh: number;
  prefillQueueLow: number;
  /** Decode KV use above which decode wants an engine, and below which it may give one. */
  decodeKvHigh: number;
  decodeKvLow: number;
  /** The adjustment interval: no switch within this long of the last (ms). */
  cooldownMs: number;
  minPrefillEngines: number;
  minDecodeEngines: number;
}

export const DEFAULT_THRESHOLD_CONTROLLER: ThresholdControllerSettings = Object.freeze({
  prefillQueueHigh: 4,
  prefillQueueLow: 1,
  decodeKvHigh: 0.8,
  decodeKvLow: 0.4,
  cooldownMs: 30_000,
  minPrefillEngines: 1,
  minDecodeEngines: 1,
});

export class ThresholdRoleController implements RoleController {
  readonly #settings: ThresholdControllerSettings;
  #lastSwitchAt = Number.NEGATIVE_INFINITY;

  constructor(settings: Partial<ThresholdControllerSettings> = {}) {
    this.#settings = { ...DEFAULT_THRESHOLD_CONTROLLER, ...settings };
  }

  decide(engines: readonly RoleEngineState[], demand: RoleDemand, now: number): RoleDecision {
    const s = this.#settings;
    const { prefill, decode } = splitOf(engines);
    if (prefill.length + decode.length === 0) return { action: "hold", reason: "no_split_engines" };
    if (engines.some((e) => e.switching)) return { action: "hold", reason: "switch_in_progress" };
    if (now - this.#lastSwitchAt < s.cooldownMs) return { action: "hold", reason: "cooldown" };
    const queuePerEngine = demand.prefillQueue / Math.max(1, prefill.length);
    const wantsPrefill = queuePerEngine > s.prefillQueueHigh && demand.decodeKvUsage < s.decodeKvLow;
    const wantsDecode = demand.decodeKvUsage > s.decodeKvHigh && queuePerEngine < s.prefillQueueLow;
    if (!wantsPrefill && !wantsDecode) return { action: "hold", reason: "balanced" };
    const [donors, minimum] = wantsPrefill ? [decode, s.minDecodeEngines] : [prefill, s.minPrefillEngines];
    const engine = donors.length > minimum ? enginesToMove(donors)[0] : undefined;
    if (engine === undefined) return { action: "hold", reason: "minimum_engines" };
    this.#lastSwitchAt = now;
    return wantsPrefill
      ? { action: "switch", switches: [{ engineId: engine.id, from: "decode", to: "prefill", reason: `prefill queue ${queuePerEngine.toFixed(1)} per engine` }] }
      : { action: "switch", switches: [{ engineId: engine.id, from: "prefill", to: "decode", reason: `decode KV use ${(demand.decodeKvUsage * 100).toFixed(0)} %` }] };
  }
}
