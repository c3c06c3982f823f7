/*
 * The scheduling policies the simulator compares. Each is a setting of the core (no
 * rule is written here): the pool queue's priority value and starvation β, the
 * routing policy, the engine buffer and saturation, and whether engines order their
 * own waiting queue by the pool's level (vLLM's --scheduling-policy priority).
 * Two more compare placement: "cache-aware" (SGLang's router, a routing setting of
 * the core) and "agentix-tao" (Agentix's queue with the core's TAO planner placing
 * the calls; the pool core runs it, tao-simulation.ts plays the clients).
 */

import type { DispatchSettings } from "../../core/dispatch.js";
import type { SaturationSettings } from "../../core/engines.js";
import type { QueueSettings } from "../../core/queue.js";
import { DEFAULT_DISPATCH_SETTINGS } from "../../core/settings.js";
import { EngineConfig } from "../../pool/config.js";
import { vllmAdapter } from "../../pool/engines/vllm.js";

export type PolicyName =
  | "fcfs-rr"
  | "fcfs-least-loaded"
  | "request-mlq"
  | "plas"
  | "atlas"
  | "agentix"
  | "oracle"
  | "cache-aware"
  | "agentix-tao";

/** The scheduling comparison's policies (`agentix bench` runs these by default). */
export const POLICY_NAMES: readonly PolicyName[] = Object.freeze([
  "fcfs-rr",
  "fcfs-least-loaded",
  "request-mlq",
  "plas",
  "atlas",
  "agentix",
  "oracle",
]);

/** The placement comparison's additions (`npm run bench:tao`). */
export const PLACEMENT_POLICY_NAMES: readonly PolicyName[] = Object.freeze(["cache-aware", "agentix-tao"]);

/** Every policy the simulator runs. */
export const ALL_POLICY_NAMES: readonly PolicyName[] = Object.freeze([...POLICY_NAMES, ...PLACEMENT_POLICY_NAMES]);

export interface PolicyDescription {
  name: PolicyName;
  /** Short name for tables and legends. */
  label: string;
  description: string;
  /** True when calls wait in the pool's queue and engines get only a small buffer. */
  poolQueue: boolean;
}

export const POLICIES: Record<PolicyName, PolicyDescription> = Object.freeze({
  "fcfs-rr": {
    name: "fcfs-rr",
    label: "vLLM default (FCFS, round-robin)",
    description:
      "No pool queue: every call goes to an engine as soon as it is issued, round-robin over the engines, unlimited in flight; engines run FCFS (no priority scheduling).",
    poolQueue: false,
  },
  "fcfs-least-loaded": {
    name: "fcfs-least-loaded",
    label: "FCFS, least-loaded",
    description:
      "No pool queue: every call goes at once to the engine with the fewest outstanding calls (in flight + engine waiting), unlimited in flight; engines run FCFS.",
    poolQueue: false,
  },
  "request-mlq": {
    name: "request-mlq",
    label: "Request-level queue",
    description:
      "Pool queue where every call starts at the top level whatever its program received (value 0: FCFS within tenant fair share), no anti-starvation, least-loaded routing, the pool's engine buffer and saturation; engines FCFS.",
    poolQueue: true,
  },
  plas: {
    name: "plas",
    label: "PLAS",
    description:
      "Pool queue by the program's attained service (Autellix PLAS) in the pool's levels, no anti-starvation, least-loaded routing, the pool's engine buffer and saturation; engines FCFS.",
    poolQueue: true,
  },
  atlas: {
    name: "atlas",
    label: "ATLAS",
    description:
      "Pool queue by the program's critical-path service (Autellix ATLAS) in the pool's levels, no anti-starvation, least-loaded routing, the pool's engine buffer and saturation; engines FCFS.",
    poolQueue: true,
  },
  agentix: {
    name: "agentix",
    label: "Agentix",
    description:
      "The pool's defaults: PLAS value (attained service), anti-starvation β, short/long cache-affinity routing with the imbalance override, engine buffer and saturation; engines order their waiting queue by the call's level (vLLM priority = level).",
    poolQueue: true,
  },
  oracle: {
    name: "oracle",
    label: "Oracle (SRPT)",
    description:
      "Pool queue by the program's true remaining work (its unfinished calls' batch-1 engine time, known only to the simulator): shortest remaining program first, in fine levels; no anti-starvation; otherwise exactly agentix (short/long cache-affinity routing, the pool's engine buffer and saturation, engine priority = level), so its gap to agentix is what knowing the remaining work is worth.",
    poolQueue: true,
  },
  "cache-aware": {
    name: "cache-aware",
    label: "Cache-aware router (SGLang)",
    description:
      "No pool queue, like SGLang's router: every call goes out at once to the engine whose prefix tree (the prompts the router sent there) matches more than half its prompt, else to the engine with the smallest tree; the least-loaded engine instead when loads are imbalanced (max - min > 32 and max > 1.1 x min); unlimited in flight; engines FCFS.",
    poolQueue: false,
  },
  "agentix-tao": {
    name: "agentix-tao",
    label: "Agentix + TAO placement",
    description:
      "Agentix's pool queue (PLAS value, anti-starvation, engine buffer and saturation, vLLM priority = level), but the TAO planner places the waiting programs jointly under each engine's free KV (cache credit, then readiness, then tokens) and holds a slot on its cache engine for a program whose tool is predicted to end within 1 s.",
    poolQueue: true,
  },
} satisfies Record<PolicyName, PolicyDescription>);

export function isPolicyName(name: string): name is PolicyName {
  return (ALL_POLICY_NAMES as readonly string[]).includes(name);
}

/** The pool's default engine buffer (EngineConfig's maxInFlight default), read from the config schema itself. */
export const POOL_DEFAULT_MAX_IN_FLIGHT: number = EngineConfig.parse({ id: "sim", url: "http://sim.invalid" }).maxInFlight;

/** How the simulator sets up the pool and engines for a policy. */
export interface PolicySetup {
  dispatch: DispatchSettings;
  /** Per-engine cap on calls in flight (Infinity: no pool queue). */
  maxInFlight: number;
  /** Engines order waiting requests by priority (else FCFS). */
  priorityScheduling: boolean;
  /** The engine request's priority field for a dispatched call, or undefined for none. */
  enginePriority: ((level: number, levels: number) => number | undefined) | undefined;
  /** "tao": the TAO planner places queued calls instead of the routing policy. Default "route". */
  placement?: "route" | "tao";
}

/** No cap: a direct (no pool queue) load balancer. */
const NEVER_SATURATED: SaturationSettings = Object.freeze({ maxEngineWaiting: Infinity, maxKvUsage: Infinity });

/**
 * Oracle levels: fine (25 % apart, from 100 ms to ~48 min) so the order is close to
 * exact shortest-remaining-first; the pool's levels are coarse on purpose, an oracle
 * has no reason to be.
 */
const ORACLE_LEVELS: Pick<QueueSettings, "levels" | "firstBoundMs" | "growth"> = Object.freeze({ levels: 48, firstBoundMs: 100, growth: 1.25 });

export function policySetup(name: PolicyName, options: { maxInFlightPerEngine?: number } = {}): PolicySetup {
  const maxInFlight = options.maxInFlightPerEngine ?? POOL_DEFAULT_MAX_IN_FLIGHT;
  if (!(Number.isInteger(maxInFlight) && maxInFlight >= 1)) {
    throw new RangeError(`maxInFlightPerEngine must be an integer >= 1, got ${maxInFlight}`);
  }
  const defaults = DEFAULT_DISPATCH_SETTINGS;
  const noStarvation = { starvationRatio: Infinity };
  const queued = (queue: Partial<QueueSettings>): PolicySetup => ({
    dispatch: {
      queue: { ...defaults.queue, ...noStarvation, ...queue },
      routing: { ...defaults.routing, policy: "least-loaded" },
      saturation: { ...defaults.saturation },
      admission: defaults.admission,
      service: defaults.service,
    },
    maxInFlight,
    priorityScheduling: false,
    enginePriority: undefined,
  });
  const direct = (routing: "round-robin" | "least-loaded" | "cache-aware"): PolicySetup => ({
    dispatch: {
      queue: { ...defaults.queue, ...noStarvation, priorityValue: "none" },
      routing: { ...defaults.routing, policy: routing },
      saturation: NEVER_SATURATED,
      admission: undefined,
      service: defaults.service,
    },
    maxInFlight: Infinity,
    priorityScheduling: false,
    enginePriority: undefined,
  });
  switch (name) {
    case "fcfs-rr":
      return direct("round-robin");
    case "fcfs-least-loaded":
      return direct("least-loaded");
    case "request-mlq":
      return queued({ priorityValue: "none" });
    case "plas":
      return queued({ priorityValue: "plas" });
    case "atlas":
      return queued({ priorityValue: "atlas" });
    case "oracle": {
      // Agentix with perfect knowledge: the same placement and engine priority, so the
      // gap to agentix is what knowing each program's remaining work is worth.
      const setup = agentix();
      setup.dispatch.queue = { ...setup.dispatch.queue, ...noStarvation, priorityValue: "oracle", ...ORACLE_LEVELS };
      return setup;
    }
    case "cache-aware":
      return direct("cache-aware");
    case "agentix":
      return agentix();
    case "agentix-tao":
      // TAO's planner places under the free KV of the same account admission keeps (core/pool-core.ts).
      return { ...agentix(), placement: "tao" };
  }
  function agentix(): PolicySetup {
    return {
      dispatch: {
        queue: { ...defaults.queue },
        routing: { ...defaults.routing },
        saturation: { ...defaults.saturation },
        admission: defaults.admission,
        service: defaults.service,
      },
      maxInFlight,
      priorityScheduling: true,
      // The same rule the pool's vLLM adapter applies: priority = level.
      enginePriority: (level, levels) => vllmAdapter.priorityFor({ level, levels }),
    };
  }
}
