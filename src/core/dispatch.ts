/*
 * One planning step, shared by the pool service and the simulator: hand out queued
 * calls, in priority order, while some engine can take one.
 */

import { type EngineState, isAvailable, type SaturationSettings, validateSaturationSettings } from "./engines.js";
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
}

export function validateDispatchSettings(settings: DispatchSettings): void {
  validateQueueSettings(settings.queue);
  validateRoutingSettings(settings.routing);
  validateSaturationSettings(settings.saturation);
}

export interface Dispatch {
  call: QueuedCall;
  engineId: string;
  level: number;
  promoted: boolean;
  reason: RouteReason;
}

/**
 * Takes as many calls as engines can accept now, in priority order; updates the
 * inFlight of the given engine states in place as it assigns; removes taken calls
 * from the queue. O(d · (dequeue + E)) for d dispatches and E engines. Round-robin
 * routing (a baseline) needs the caller's cursor, cache-aware routing (another) the
 * caller's prefix matcher.
 */
export function takeDispatches(
  queue: ProgramQueue,
  engines: EngineState[],
  now: number,
  settings: DispatchSettings,
  cursor?: RoundRobinCursor,
  prefixes?: PrefixMatcher<QueuedCall>,
): Dispatch[] {
  validateRoutingSettings(settings.routing);
  validateSaturationSettings(settings.saturation);
  const ids = new Set(engines.map((engine) => engine.id));
  if (ids.size !== engines.length) throw new RangeError("engine ids must be unique");
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
  return dispatches;
}
