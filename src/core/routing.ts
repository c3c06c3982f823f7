/*
 * Engine choice for one call (Autellix's routing with SGLang's imbalance override).
 * A short prompt has little prefix to reuse: least-loaded engine. A long prompt goes
 * to the engine that served the program last (its prefix cache holds the context),
 * unless that engine is unavailable, or is overloaded against the least-loaded one by
 * both an absolute and a relative margin (SGLang: max - min > 32 and max > 1.1 · min).
 *
 * Two plain policies serve as baselines (the simulator's): "least-loaded" for every
 * call, and "round-robin" (a stock load balancer, e.g. vLLM's production-stack
 * router), which cycles over the available engines with a cursor the caller keeps.
 */

import { type EngineState, engineLoad, isAvailable, type SaturationSettings } from "./engines.js";

export interface RoutingSettings {
  /** Prompts with at least this many tokens are "long" and prefer cache affinity. */
  longPromptTokens: number;
  /** Imbalance override: load(affinity) - load(least) must exceed this ... */
  imbalanceAbs: number;
  /** ... and load(affinity) must exceed this times load(least). */
  imbalanceRatio: number;
  /** Default "affinity" (the rule above); the others are baselines. */
  policy?: RoutingPolicy;
}

export type RoutingPolicy = "affinity" | "least-loaded" | "round-robin";

export const ROUTING_POLICIES: readonly RoutingPolicy[] = Object.freeze(["affinity", "least-loaded", "round-robin"]);

export type RouteReason =
  | "short-least-loaded"
  | "long-no-affinity"
  | "long-affinity"
  | "long-affinity-unavailable"
  | "long-imbalance"
  | "least-loaded"
  | "round-robin";

/** Where round-robin routing resumes: the index (in the engine list) to try first. Owned by the caller. */
export interface RoundRobinCursor {
  next: number;
}

export interface Route {
  engineId: string;
  reason: RouteReason;
}

export function validateRoutingSettings(settings: RoutingSettings): void {
  if (!(settings.longPromptTokens >= 0)) {
    throw new RangeError(`longPromptTokens must be >= 0, got ${settings.longPromptTokens}`);
  }
  if (!(settings.imbalanceAbs >= 0)) throw new RangeError(`imbalanceAbs must be >= 0, got ${settings.imbalanceAbs}`);
  if (!(settings.imbalanceRatio >= 1)) throw new RangeError(`imbalanceRatio must be >= 1, got ${settings.imbalanceRatio}`);
  if (settings.policy !== undefined && !ROUTING_POLICIES.includes(settings.policy)) {
    throw new RangeError(`routing policy must be one of ${ROUTING_POLICIES.join(", ")}, got ${String(settings.policy)}`);
  }
}

/** Least-loaded available engine; ties go to the lowest id so the choice is deterministic. */
export function leastLoaded(engines: readonly EngineState[], saturation: SaturationSettings): EngineState | undefined {
  let best: EngineState | undefined;
  for (const engine of engines) {
    if (!isAvailable(engine, saturation)) continue;
    if (best === undefined) {
      best = engine;
      continue;
    }
    const load = engineLoad(engine);
    const bestLoad = engineLoad(best);
    if (load < bestLoad || (load === bestLoad && engine.id < best.id)) best = engine;
  }
  return best;
}

/** A route with the chosen engine itself, for callers that update its state. */
export interface EngineChoice {
  engine: EngineState;
  reason: RouteReason;
}

/**
 * The first available engine at or after the cursor, cyclically; the cursor moves
 * past it. Unavailable engines are skipped, not waited for. O(E).
 */
export function nextRoundRobin(
  engines: readonly EngineState[],
  saturation: SaturationSettings,
  cursor: RoundRobinCursor,
): EngineState | undefined {
  const n = engines.length;
  if (n === 0) return undefined;
  if (!Number.isInteger(cursor.next) || cursor.next < 0) throw new RangeError(`round-robin cursor must be an integer >= 0, got ${cursor.next}`);
  const start = cursor.next % n;
  for (let k = 0; k < n; k++) {
    const index = (start + k) % n;
    const engine = engines[index] as EngineState;
    if (!isAvailable(engine, saturation)) continue;
    cursor.next = (index + 1) % n;
    return engine;
  }
  return undefined;
}

/**
 * chooseEngine, returning the engine object rather than its id. Round-robin routing
 * needs the caller's cursor (and advances it); the other policies ignore it.
 */
export function pickEngine(
  call: { promptTokens: number; affinityEngine?: string },
  engines: readonly EngineState[],
  routing: RoutingSettings,
  saturation: SaturationSettings,
  cursor?: RoundRobinCursor,
): EngineChoice | undefined {
  const policy = routing.policy ?? "affinity";
  if (policy === "round-robin") {
    if (cursor === undefined) throw new RangeError("round-robin routing needs a cursor");
    const engine = nextRoundRobin(engines, saturation, cursor);
    return engine === undefined ? undefined : { engine, reason: "round-robin" };
  }
  const least = leastLoaded(engines, saturation);
  if (least === undefined) return undefined;
  if (policy === "least-loaded") return { engine: least, reason: "least-loaded" };
  if (call.promptTokens < routing.longPromptTokens) return { engine: least, reason: "short-least-loaded" };
  if (call.affinityEngine === undefined) return { engine: least, reason: "long-no-affinity" };
  const affinity = engines.find((engine) => engine.id === call.affinityEngine);
  if (affinity === undefined || !isAvailable(affinity, saturation)) {
    return { engine: least, reason: "long-affinity-unavailable" };
  }
  const affinityLoad = engineLoad(affinity);
  const leastLoad = engineLoad(least);
  if (affinityLoad - leastLoad > routing.imbalanceAbs && affinityLoad > routing.imbalanceRatio * leastLoad) {
    return { engine: least, reason: "long-imbalance" };
  }
  return { engine: affinity, reason: "long-affinity" };
}

/** Among healthy, unsaturated engines. undefined when none can take a call. */
export function chooseEngine(
  call: { promptTokens: number; affinityEngine?: string },
  engines: readonly EngineState[],
  routing: RoutingSettings,
  saturation: SaturationSettings,
  cursor?: RoundRobinCursor,
): Route | undefined {
  const choice = pickEngine(call, engines, routing, saturation, cursor);
  return choice === undefined ? undefined : { engineId: choice.engine.id, reason: choice.reason };
}
