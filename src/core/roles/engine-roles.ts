import { ENGINE_ROLES, type EngineRole, ROLE_SWITCH_MODES, type RoleEngineState, type RoleSwitch, type RoleSwitchMode, type SplitRole } from "./roles.js";

/*
 * The roles of a pool's engines as the pool core places calls by them (issue 13): a new
 * call goes to an engine that prefills (prefill or mixed), a disaggregated call's decode
 * to a decode engine. How an engine switches is its own (configured per engine):
 * - "overlap", for an engine that serves both sides (vLLM started kv_both: its KV
 *   connector acts on each request's kv_transfer_params; the simulated engine): from
 *   the switch on it is given the new role's work and none of the old role's; the old
 *   role's calls in flight finish where they are, in the same batches as the new work.
 *   The switch is complete when the old role's last call left.
 * - "drain", for an engine whose side is fixed when it starts (SGLang's
 *   --disaggregation-mode, vLLM kv_producer / kv_consumer): from its start the engine is
 *   given nothing new of either role, the calls on it finish, and once none is left it
 *   takes its new role (the operator's restart, if one is needed, comes after).
 * The caller counts each engine's calls by the role the engine had when it was given
 * them (CallsByRole). Pure: the core tells it when calls left.
 */

/** The calls on an engine, by the role it had when it was given each (absent: none). */
export type CallsByRole = Readonly<Partial<Record<EngineRole, number>>>;

export interface RoleSwitchDone extends RoleSwitch {
  mode: RoleSwitchMode;
  /** When the switch was complete: the engine had drained, or (overlap) its old role's last call left (the core's clock). */
  atMs: number;
}

/** A pool with prefill engines must have decode engines, or its calls would have nowhere to decode. */
export function validateEngineRoles(roles: readonly EngineRole[]): void {
  for (const role of roles) if (!ENGINE_ROLES.includes(role)) throw new RangeError(`engine role must be one of ${ENGINE_ROLES.join(", ")}, got ${String(role)}`);
  if (roles.includes("prefill") && !roles.includes("decode")) throw new RangeError("a pool with prefill engines needs at least one decode engine");
}

interface RoleEntry {
  /** The role it serves: during an overlapping switch already the new one; during a drain still the old one. */
  role: EngineRole;
  mode: RoleSwitchMode;
  /** A drain under way (it takes nothing new). */
  draining: RoleSwitch | undefined;
  /** An overlapping switch whose old role (`from`) still has calls on the engine. */
  finishing: RoleSwitch | undefined;
}

const callsOf = (calls: CallsByRole, role: EngineRole): number => Math.max(0, calls[role] ?? 0);
const totalCalls = (calls: CallsByRole): number => ENGINE_ROLES.reduce((sum, role) => sum + callsOf(calls, role), 0);

export class EngineRoleBook {
  readonly #entries = new Map<string, RoleEntry>();
  #done: RoleSwitchDone[] = [];

  /** `switchMode` per engine; default "drain" (the one every engine supports). */
  constructor(roles: readonly { id: string; role: EngineRole; switchMode?: RoleSwitchMode | undefined }[]) {
    validateEngineRoles(roles.map((r) => r.role));
    for (const { id, role, switchMode } of roles) {
      const mode = switchMode ?? "drain";
      if (!ROLE_SWITCH_MODES.includes(mode)) throw new RangeError(`role switch mode must be one of ${ROLE_SWITCH_MODES.join(", ")}, got ${String(mode)}`);
      this.#entries.set(id, { role, mode, draining: undefined, finishing: undefined });
    }
  }

  role(engineId: string): EngineRole | undefined {
    return this.#entries.get(engineId)?.role;
  }

  switchMode(engineId: string): RoleSwitchMode | undefined {
    return this.#entries.get(engineId)?.mode;
  }

  /** True when some engine is not mixed (the pool disaggregates) or one is switching. */
  get split(): boolean {
    for (const entry of this.#entries.values()) if (entry.role !== "mixed" || entry.draining !== undefined || entry.finishing !== undefined) return true;
    return false;
  }

  /** In a switch that is not complete (draining, or finishing its old role's calls). */
  switching(engineId: string): boolean {
    const entry = this.#entries.get(engineId);
    return entry !== undefined && (entry.draining !== undefined || entry.finishing !== undefined);
  }

  /** Draining: takes nothing new until its calls are done. */
  draining(engineId: string): boolean {
    return this.#entries.get(engineId)?.draining !== undefined;
  }

  /** May be given a new call (its prefill, or the whole call on a mixed engine). */
  takesNewCalls(engineId: string): boolean {
    const entry = this.#entries.get(engineId);
    return entry !== undefined && entry.draining === undefined && entry.role !== "decode";
  }

  /** May be given a disaggregated call's decode. */
  takesDecodes(engineId: string): boolean {
    const entry = this.#entries.get(engineId);
    return entry !== undefined && entry.draining === undefined && entry.role === "decode";
  }

  /**
   * Starts `engineId`'s switch toward `to`, in the engine's mode; false when it cannot
   * switch (unknown, mixed, not in `from`, already switching, or the last engine serving
   * its side, which would leave prefill engines with nowhere to decode or calls with
   * nowhere to start). `callsOn`: the calls on it now.
   */
  startSwitch(roleSwitch: RoleSwitch, callsOn: CallsByRole, nowMs: number): boolean {
    const entry = this.#entries.get(roleSwitch.engineId);
    if (entry === undefined || entry.draining !== undefined || entry.finishing !== undefined || entry.role !== roleSwitch.from || roleSwitch.from === roleSwitch.to) return false;
    const others = [...this.#entries.entries()].filter(([id, other]) => id !== roleSwitch.engineId && other.draining === undefined);
    if (!others.some(([, other]) => other.role === entry.role)) return false;
    if (entry.mode === "overlap") {
      entry.role = roleSwitch.to;
      entry.finishing = roleSwitch;
    } else entry.draining = roleSwitch;
    this.callsEnded(roleSwitch.engineId, callsOn, nowMs);
    return true;
  }

  /** The engine holds `callsOn` now: a draining one with none left takes its new role; an overlapping one with none of its old role left is done. */
  callsEnded(engineId: string, callsOn: CallsByRole, nowMs: number): void {
    const entry = this.#entries.get(engineId);
    if (entry === undefined) return;
    if (entry.draining !== undefined && totalCalls(callsOn) === 0) {
      const done = entry.draining;
      entry.role = done.to;
      entry.draining = undefined;
      this.#done.push({ ...done, mode: "drain", atMs: nowMs });
    }
    if (entry.finishing !== undefined && callsOf(callsOn, entry.finishing.from) === 0) {
      const done = entry.finishing;
      entry.finishing = undefined;
      this.#done.push({ ...done, mode: "overlap", atMs: nowMs });
    }
  }

  /** The switches that completed since the last call (for the pool's log and counters). */
  takeFinished(): RoleSwitchDone[] {
    const done = this.#done;
    this.#done = [];
    return done;
  }

  /** The engines as a role controller reads them. */
  states(loadOf: (engineId: string) => number): RoleEngineState[] {
    return [...this.#entries.entries()].map(([id, entry]) => ({
      id,
      role: entry.role,
      switching: entry.draining !== undefined,
      finishing: entry.finishing !== undefined,
      load: loadOf(id),
    }));
  }

  /** Each engine's role, the role it drains toward, and the old role whose calls it still finishes (inspection). */
  snapshot(): { id: string; role: EngineRole; switchingTo: SplitRole | undefined; finishingFrom: SplitRole | undefined; mode: RoleSwitchMode }[] {
    return [...this.#entries.entries()].map(([id, entry]) => ({ id, role: entry.role, switchingTo: entry.draining?.to, finishingFrom: entry.finishing?.from, mode: entry.mode }));
  }
}
