/*
 * Engine roles (issue 13, Evolving Infra): a `mixed` engine prefills and decodes its
 * own calls (today's behaviour); in a disaggregated pool a call is prefilled on a
 * `prefill` engine, its KV moved to a `decode` engine, and decoded there. The split
 * between the two follows the workload: a role controller (ratio-controller.ts, or the
 * threshold baseline) moves one engine at a time from one role to the other; the engine
 * drains its current role's work first, so a switch loses no call.
 */

export const ENGINE_ROLES = ["prefill", "decode", "mixed"] as const;
export type EngineRole = (typeof ENGINE_ROLES)[number];

/** The roles a controller moves engines between. */
export type SplitRole = Exclude<EngineRole, "mixed">;

/** An engine as a role controller sees it. */
export interface RoleEngineState {
  id: string;
  role: EngineRole;
  /** Switching to another role (draining): the controller starts no other switch meanwhile. */
  switching: boolean;
  /** Calls on the engine now (what a switch has to drain). */
  load: number;
}

/** What an engine does per second given one role alone (from its cost model: prefill rate, and decode rate at a full batch). */
export interface RoleCapacity {
  prefillTokensPerSec: number;
  decodeTokensPerSec: number;
}

/** Demand over the controller's last window, as the pool (or simulator) measured it. */
export interface RoleDemand {
  /** Prompt tokens that needed computing (not cache hits) per second. */
  prefillTokensPerSec: number;
  /** Output tokens per second. */
  decodeTokensPerSec: number;
  /** Calls waiting for a prefill engine, at the end of the window. */
  prefillQueue: number;
  /** The decode engines' KV use, 0–1, mean at the end of the window. */
  decodeKvUsage: number;
  /** P95 time to first token and mean inter-token latency in the window; undefined when nothing finished. */
  ttftP95Ms: number | undefined;
  itlMs: number | undefined;
}

export interface RoleSwitch {
  engineId: string;
  from: SplitRole;
  to: SplitRole;
  /** Why, for the log and the switch counter's label. */
  reason: string;
}

/** A controller's answer to one round: a switch to start, or why none. */
export type RoleDecision = { action: "switch"; switch: RoleSwitch } | { action: "hold"; reason: RoleHoldReason };

export type RoleHoldReason = "switch_in_progress" | "cooldown" | "idle" | "balanced" | "minimum_engines" | "no_split_engines";

export interface RoleController {
  decide(engines: readonly RoleEngineState[], demand: RoleDemand, now: number): RoleDecision;
}

/** The split engines by role (mixed ones are not the controller's). */
export function splitOf(engines: readonly RoleEngineState[]): { prefill: RoleEngineState[]; decode: RoleEngineState[] } {
  return { prefill: engines.filter((e) => e.role === "prefill"), decode: engines.filter((e) => e.role === "decode") };
}

/** The donor side's engine that drains soonest: least load, then ID, so the choice is deterministic. */
export function engineToMove(candidates: readonly RoleEngineState[]): RoleEngineState | undefined {
  return [...candidates].sort((a, b) => a.load - b.load || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))[0];
}
