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
 *
 * A third baseline, "cache-aware", is SGLang's router (sgl-router, cache_aware):
 *   1. imbalanced (the same two margins over the available engines' loads):
 *      the least-loaded engine ("shortest queue");
 *   2. otherwise the engine whose prefix tree matches most of the prompt, when the
 *      match is more than `cacheThreshold` (0.5) of it;
 *   3. otherwise the engine with the smallest tree ("most cache capacity left").
 * Ties go to the less loaded engine, then the lowest id. The trees are the caller's
 * (prefix-index.ts keeps them; the router inserts each prompt where it sends it),
 * read through a PrefixMatcher.
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
  /**
   * "cache-aware" only: a prefix match above this share of the prompt (0..1) goes to
   * the matching engine; default DEFAULT_CACHE_THRESHOLD (SGLang's cache_threshold).
   */
  cacheThreshold?: number;
  /**
   * "affinity" only: a long call's hint is dropped once its engine has computed more
   * than this × its KV capacity in prompt tokens since the program's call left it (the
   * prefix is likely evicted: kv/affinity-turnover.ts). Undefined: hints are always kept.
   */
  affinityTurnover?: number;
}

export type RoutingPolicy = "affinity" | "least-loaded" | "round-robin" | "cache-aware";

export const ROUTING_POLICIES: readonly RoutingPolicy[] = Object.freeze(["affinity", "least-loaded", "round-robin", "cache-aware"]);

/** SGLang router's default cache_threshold. */
export const DEFAULT_CACHE_THRESHOLD = 0.5;

/**
 * What "cache-aware" routing reads from the caller's prefix trees (one per engine).
 * `C` is the call type the caller routes (e.g. QueuedCall), so the matcher can find
 * the call's prompt by its id.
 */
export interface PrefixMatcher<C> {
  /** Leading tokens of the call's prompt that the engine's tree holds. */
  matchedTokens(call: C, engineId: string): number;
  /** Tokens the engine's tree holds. */
  treeTokens(engineId: string): number;
}

export type RouteReason =
  | "short-least-loaded"
  | "long-no-affinity"
  /** The hint's engine turned over its KV since the program's call left it (kv/affinity-turnover.ts): least-loaded. */
  | "long-affinity-turned-over"
  | "long-affinity"
  | "long-affinity-unavailable"
  | "long-imbalance"
  | "least-loaded"
  | "round-robin"
  /** cache-aware: loads imbalanced, the least-loaded engine. */
  | "cache-imbalance"
  /** cache-aware: the engine whose tree matched more than the threshold. */
  | "cache-match"
  /** cache-aware: no match above the threshold, the engine with the smallest tree. */
  | "cache-smallest-tree"
  /** TAO: the placement plan's engine (core/tao/apply-plan.ts). */
  | "tao-plan"
  /** TAO: the engine a reservation held for the program. */
  | "tao-reserved";

/** What routing reads of a call. */
export interface RoutedCall {
  promptTokens: number;
  /** The engine that served the program last. */
  affinityEngine?: string | undefined;
  /** The hint the pool dropped because that engine turned over its KV since (kv/affinity-turnover.ts). */
  affinityTurnedOver?: string | undefined;
}

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
  if (settings.cacheThreshold !== undefined && !(settings.cacheThreshold >= 0 && settings.cacheThreshold <= 1)) {
    throw new RangeError(`cacheThreshold must be in [0, 1], got ${settings.cacheThreshold}`);
  }
  if (settings.affinityTurnover !== undefined && !(Number.isFinite(settings.affinityTurnover) && settings.affinityTurnover > 0)) {
    throw new RangeError(`affinityTurnover must be a finite number > 0, got ${settings.affinityTurnover}`);
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

/** Lower load first, then the lowest id: the tie-break of every cache-aware step. */
function lessLoaded(a: EngineState, b: EngineState): boolean {
  const loadA = engineLoad(a);
  const loadB = engineLoad(b);
  return loadA < loadB || (loadA === loadB && a.id < b.id);
}

/** SGLang's cache-aware choice (see the top of this file). O(E · match). */
export function cacheAwareChoice<C extends { promptTokens: number }>(
  call: C,
  engines: readonly EngineState[],
  routing: RoutingSettings,
  saturation: SaturationSettings,
  prefixes: PrefixMatcher<C>,
): EngineChoice | undefined {
  const available = engines.filter((engine) => isAvailable(engine, saturation));
  const least = leastLoaded(available, saturation);
  if (least === undefined) return undefined;
  let maxLoad = 0;
  for (const engine of available) maxLoad = Math.max(maxLoad, engineLoad(engine));
  const minLoad = engineLoad(least);
  if (maxLoad - minLoad > routing.imbalanceAbs && maxLoad > routing.imbalanceRatio * minLoad) return { engine: least, reason: "cache-imbalance" };

  let best: EngineState | undefined;
  let bestMatch = -1;
  for (const engine of available) {
    const matched = prefixes.matchedTokens(call, engine.id);
    if (!(Number.isFinite(matched) && matched >= 0)) throw new RangeError(`matched tokens must be a finite number >= 0, got ${matched}`);
    if (matched > bestMatch || (matched === bestMatch && best !== undefined && lessLoaded(engine, best))) {
      best = engine;
      bestMatch = matched;
    }
  }
  const threshold = routing.cacheThreshold ?? DEFAULT_CACHE_THRESHOLD;
  const ratio = call.promptTokens > 0 ? bestMatch / call.promptTokens : 0;
  if (best !== undefined && ratio > threshold) return { engine: best, reason: "cache-match" };

  let smallest = least;
  let smallestTree = prefixes.treeTokens(least.id);
  for (const engine of available) {
    const tree = prefixes.treeTokens(engine.id);
    if (tree < smallestTree || (tree === smallestTree && lessLoaded(engine, smallest))) {
      smallest = engine;
      smallestTree = tree;
    }
  }
  return { engine: smallest, reason: "cache-smallest-tree" };
}

/**
 * chooseEngine, returning the engine object rather than its id. Round-robin routing
 * needs the caller's cursor (and advances it), cache-aware routing the caller's
 * prefix matcher; the other policies ignore both.
 */
export function pickEngine<C extends RoutedCall>(
  call: C,
  engines: readonly EngineState[],
  routing: RoutingSettings,
  saturation: SaturationSettings,
  cursor?: RoundRobinCursor,
  prefixes?: PrefixMatcher<C>,
): EngineChoice | undefined {
  const policy = routing.policy ?? "affinity";
  if (policy === "round-robin") {
    if (cursor === undefined) throw new RangeError("round-robin routing needs a cursor");
    const engine = nextRoundRobin(engines, saturation, cursor);
    return engine === undefined ? undefined : { engine, reason: "round-robin" };
  }
  if (policy === "cache-aware") {
    if (prefixes === undefined) throw new RangeError("cache-aware routing needs a prefix matcher");
    return cacheAwareChoice(call, engines, routing, saturation, prefixes);
  }
  const least = leastLoaded(engines, saturation);
  if (least === undefined) return undefined;
  if (policy === "least-loaded") return { engine: least, reason: "least-loaded" };
  if (call.promptTokens < routing.longPromptTokens) return { engine: least, reason: "short-least-loaded" };
  if (call.affinityEngine === undefined) return { engine: least, reason: call.affinityTurnedOver === undefined ? "long-no-affinity" : "long-affinity-turned-over" };
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
export function chooseEngine<C extends RoutedCall>(
  call: C,
  engines: readonly EngineState[],
  routing: RoutingSettings,
  saturation: SaturationSettings,
  cursor?: RoundRobinCursor,
  prefixes?: PrefixMatcher<C>,
): Route | undefined {
  const choice = pickEngine(call, engines, routing, saturation, cursor, prefixes);
  return choice === undefined ? undefined : { engineId: choice.engine.id, reason: choice.reason };
}
