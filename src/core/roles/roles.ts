/*
 * Engine roles (issue 13, Evolving Infra): a `mixed` engine prefills and decodes its
 * own calls (today's behaviour); in a disaggregated pool a call is prefilled on a
 * `prefill` engine, its KV moved to a `decode` engine, and decoded there. The split
 * between the two follows the workload: a role controller (ratio-controller.ts, or the
 * threshold baseline) moves engines from one role to the other. How an engine switches
 * depends on what it can serve (engine-roles.ts): one that serves both sides (a vLLM
 * engine started kv_both, the simulated engine) takes its new role at once while its
 * old role's calls finish where they are ("overlap"); one whose side is fixed when it
 * starts (SGLang's PD mode) drains first ("drain"). Either way no call is lost.
 */

export const ENGINE_ROLES = ["prefill", "decode", "mixed"] as const;
export type EngineRole = (typeof ENGINE_ROLES)[number];

/** The roles a controller moves engines between. */
export type SplitRole = Exclude<EngineRole, "mixed">;

/**
 * How an engine switches roles: "overlap" takes the new role's work from the switch on
 * while the old role's calls in flight finish in the same batches; "drain" takes
 * nothing new of either role until every call on it finished, then takes the new role.
 */
export const ROLE_SWITCH_MODES = ["overlap", "drain"] as const;
export type RoleSwitchMode = (typeof ROLE_SWITCH_MODES)[number];

/** An engine as a role controller sees it. */
export interface RoleEngineState {
  id: string;
  role: EngineRole;
  /** Draining toward another role (it serves neither): the controller starts no other switch meanwhile. */
  switching: boolean;
  /**
   * Took its new role at once (overlap) and still finishes calls of its old one: it
   * counts in its new role, and is not moved again until they are done (absent: false).
   */
  finishing?: boolean;
  /** Calls on the engine now (what a switch has to drain). */
  load: number;
}

/** What one decode engine holds: the KV it may fill (tokens, after the admission headroom). */
export interface RoleCapacity {
  decodeKvTokens: number;
}

/**
 * Demand over the controller's last window, as the pool (or simulator) measured it.
 * Work is in engine-milliseconds per second (1,000 is one engine busy the whole
 * time), from the engine's cost model, so long-context prefill (attention grows with
 * the context) and long-context decode (each token reads the whole context) weigh
 * what they cost, not what their token counts say.
 */
export interface RoleDemand {
  /** Prefill work arriving: the cost model over each call's tokens to compute (past its cached prefix), per second. */
  prefillWorkMsPerSec: number;
  /** Prefill work waiting now: calls sent to prefill and not yet prefilled (engine-ms). */
  prefillBacklogMs: number;
  /** Decode work: each output token made in the window at its context (per-sequence and KV-read terms, its share of a full batch's base), per second. */
  decodeWorkMsPerSec: number;
  /** Context tokens of the calls decoding or waiting to decode (the KV they hold or need). */
  decodeKvTokens: number;
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

/** A controller's answer to one round: the switches to start (all the same way), or why none. */
export type RoleDecision = { action: "switch"; switches: RoleSwitch[] } | { action: "hold"; reason: RoleHoldReason };

export type RoleHoldReason = "switch_in_progress" | "cooldown" | "idle" | "balanced" | "minimum_engines" | "no_split_engines";

export interface RoleController {
  decide(engines: readonly RoleEngineState[], demand: RoleDemand, now: number): RoleDecision;
}

/**
 * How often a role controller looks at the demand, by default (the pool's roles.roundMs,
 * the simulator's roundMs). Short, because a switch is cheap where engines overlap: the
 * controller's sustain rounds and smoothing, not a long round, keep it from chasing noise.
 */
export const DEFAULT_ROLE_ROUND_MS = 2_500;

/** The split engines by role (mixed ones are not the controller's). */
export function splitOf(engines: readonly RoleEngineState[]): { prefill: RoleEngineState[]; decode: RoleEngineState[] } {
  return { prefill: engines.filter((e) => e.role === "prefill"), decode: engines.filter((e) => e.role === "decode") };
}

/** The donor side's `count` engines that drain soonest: least load, then ID, so the choice is deterministic; none still in a switch. */
export function enginesToMove(candidates: readonly RoleEngineState[], count = 1): RoleEngineState[] {
  return candidates.filter((e) => !e.switching && e.finishing !== true).sort((a, b) => a.load - b.load || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).slice(0, count);
}
