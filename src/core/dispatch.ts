/*
 * One planning step, shared by the pool service and the simulator: hand out queued
 * calls, in priority order, while some engine can take one.
 *
 * With admission (admission.ts), "can take one" is asked of the call itself: the
 * engines that would admit the next call in order (KV room, step time, safety limits)
 * are the ones routing chooses among, and when none would, the call is held and
 * nothing behind it goes either (strict order: what is held is what ordering decides).
 */

import { type Admission, type AdmissionSettings, HOLD_REASONS, type HoldReason, validateAdmissionSettings } from "./admission.js";
import { backedUp, type EngineState, isAvailable, type SaturationSettings, validateSaturationSettings } from "./engines.js";
import { type ProgramQueue, type QueuedCall, type QueueSettings, validateQueueSettings } from "./queue.js";
import {
  type EngineChoice,
  pickEngine,
  type PrefixMatcher,
  type RoundRobinCursor,
  type RouteReason,
  type RoutingSettings,
  validateRoutingSettings,
} from "./routing.js";

export interface DispatchSettings {
  /** The settings to build the ProgramQueue with; the queue orders by its own copy. */
  queue: QueueSettings;
  routing: RoutingSettings;
  saturation: SaturationSettings;
  /** Admission by what binds an engine; undefined: the count cap and scraped saturation alone (no pool-side hold by KV). */
  admission?: AdmissionSettings | undefined;
  /**
   * What a call's service (the program's PLAS/ATLAS value, the tenant's fair-share
   * charge) counts: "work", its standalone engine time from the engine's cost model and
   * the usage it reported (load does not inflate it); "wall", dispatch to last byte.
   * "work" falls back to wall time for an engine without a cost model or a call without
   * usage. Default "work".
   */
  service?: ServiceMeasure | undefined;
}

export type ServiceMeasure = "work" | "wall";

export const SERVICE_MEASURES: readonly ServiceMeasure[] = Object.freeze(["work", "wall"]);

export function validateDispatchSettings(settings: DispatchSettings): void {
  validateQueueSettings(settings.queue);
  validateRoutingSettings(settings.routing);
  validateSaturationSettings(settings.saturation);
  if (settings.admission !== undefined) validateAdmissionSettings(settings.admission);
  if (settings.service !== undefined && !SERVICE_MEASURES.includes(settings.service)) {
    throw new RangeError(`service must be one of ${SERVICE_MEASURES.join(", ")}, got ${String(settings.service)}`);
  }
}

export interface Dispatch {
  call: QueuedCall;
  engineId: string;
  level: number;
  promoted: boolean;
  reason: RouteReason;
}

export interface DispatchRound {
  dispatches: Dispatch[];
  /** Calls are left queued because the next one in order had no engine to admit it: why. */
  held: HoldReason | undefined;
}

export interface DispatchContext {
  /** Round-robin routing (a baseline) needs the caller's cursor. */
  cursor?: RoundRobinCursor | undefined;
  /** Cache-aware routing (another) needs the caller's prefix matcher. */
  prefixes?: PrefixMatcher<QueuedCall> | undefined;
  /** The caller's admission account; every dispatch is recorded in it as sent. */
  admission?: Admission | undefined;
}

/**
 * Takes as many calls as engines can accept now, in priority order; updates the
 * inFlight of the given engine states in place as it assigns (and the admission
 * account, when given); removes taken calls from the queue. O(d · (dequeue + E)) for
 * d dispatches and E engines.
 */
export function takeDispatches(
  queue: ProgramQueue,
  engines: EngineState[],
  now: number,
  settings: DispatchSettings,
  context: DispatchContext = {},
): DispatchRound {
  validateRoutingSettings(settings.routing);
  validateSaturationSettings(settings.saturation);
  const ids = new Set(engines.map((engine) => engine.id));
  if (ids.size !== engines.length) throw new RangeError("engine ids must be unique");
  const { cursor, prefixes, admission } = context;
  if (admission !== undefined) return admitInOrder(queue, engines, now, settings, admission, cursor, prefixes);
  const dispatches: Dispatch[] = [];
  while (queue.size > 0 && engines.some((engine) => isAvailable(engine, settings.saturation))) {
    // Route inside `accept`: the queue hands out the best call that has an engine, and
    // the last choice made belongs to the call it returns.
    const last: { choice?: EngineChoice } = {};
    const taken = queue.dequeue(now, (call) => {
      last.choice = pickEngine(call, engines, settings.routing, settings.saturation, cursor, prefixes);
      return last.choice !== undefined;
    });
    if (taken === undefined || last.choice === undefined) break;
    last.choice.engine.inFlight += 1;
    dispatches.push({
      call: taken.call,
      engineId: last.choice.engine.id,
      level: taken.level,
      promoted: taken.promoted,
      reason: last.choice.reason,
    });
  }
  return { dispatches, held: queue.size > 0 ? unavailableReason(engines, settings.saturation) : undefined };
}

/**
 * Routes one call among the engines that admit it, when there is an admission account
 * (its KV projection then replaces the scraped-KV limit), else among all by saturation
 * as set: the rule for every call the pool routes outside a dispatch round (a retry,
 * TAO's overdue programs).
 */
export function pickAdmittedEngine(
  call: QueuedCall,
  engines: readonly EngineState[],
  settings: Pick<DispatchSettings, "routing" | "saturation">,
  admission: Admission | undefined,
  cursor?: RoundRobinCursor,
): EngineChoice | undefined {
  const { routing, saturation } = settings;
  if (admission === undefined) return pickEngine(call, engines, routing, saturation, cursor);
  const admitting = engines.filter((engine) => admission.holdReason(engine, call, saturation) === undefined);
  return pickEngine(call, admitting, routing, { ...saturation, maxKvUsage: Infinity }, cursor);
}

/** Why no engine takes a call under the count cap and scraped saturation alone (the most binding reason any engine gives). */
function unavailableReason(engines: readonly EngineState[], saturation: SaturationSettings): HoldReason {
  const reasons = new Set<HoldReason>();
  for (const engine of engines) {
    if (!engine.healthy) reasons.add("unhealthy");
    else if (engine.inFlight >= engine.maxInFlight) reasons.add("count");
    else if (backedUp(engine, saturation)) reasons.add("engine-backlog");
    else if (engine.kvUsage > saturation.maxKvUsage) reasons.add("kv");
  }
  return HOLD_REASONS.find((reason) => reasons.has(reason)) ?? "count";
}

/** Routing sees only engines that admit the call; admission's KV projection replaces the scraped-KV limit there. */
function admitInOrder(
  queue: ProgramQueue,
  engines: EngineState[],
  now: number,
  settings: DispatchSettings,
  admission: Admission,
  cursor: RoundRobinCursor | undefined,
  prefixes: PrefixMatcher<QueuedCall> | undefined,
): DispatchRound {
  const routingSaturation: SaturationSettings = { ...settings.saturation, maxKvUsage: Infinity };
  const dispatches: Dispatch[] = [];
  let held: HoldReason | undefined;
  while (queue.size > 0) {
    const last: { choice?: EngineChoice } = {};
    const taken = queue.dequeue(
      now,
      (call) => {
        const admitting: EngineState[] = [];
        const reasons = new Set<HoldReason>();
        for (const engine of engines) {
          const reason = admission.holdReason(engine, call, settings.saturation);
          if (reason === undefined) admitting.push(engine);
          else reasons.add(reason);
        }
        last.choice = admitting.length === 0 ? undefined : pickEngine(call, admitting, settings.routing, routingSaturation, cursor, prefixes);
        if (last.choice === undefined) held = HOLD_REASONS.find((reason) => reasons.has(reason)) ?? "count";
        return last.choice !== undefined;
      },
      false,
    );
    if (taken === undefined || last.choice === undefined) break;
    last.choice.engine.inFlight += 1;
    admission.sent(last.choice.engine.id, taken.call);
    dispatches.push({
      call: taken.call,
      engineId: last.choice.engine.id,
      level: taken.level,
      promoted: taken.promoted,
      reason: last.choice.reason,
    });
  }
  return { dispatches, held: queue.size > 0 ? held : undefined };
}
