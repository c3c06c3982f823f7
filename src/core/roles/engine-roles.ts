import { ENGINE_ROLES, type EngineRole, type RoleEngineState, type RoleSwitch, type SplitRole } from "./roles.js";

/*
 * The roles of a pool's engines as the pool core places calls by them (issue 13): a new
 * call goes to an engine that prefills (prefill or mixed), a disaggregated call's decode
 * to a decode engine. A role switch drains first: from its start the engine is given
 * nothing new of either role, the calls on it finish, and once none is left it takes its
 * new role. Pure: the core tells it when an engine's last call left.
 */

export interface RoleSwitchDone extends RoleSwitch {
  /** When the engine had drained and took its new role (the core's clock). */
  atMs: number;
}

/** A pool with prefill engines must have decode engines, or its calls would have nowhere to decode. */
export function validateEngineRoles(roles: readonly EngineRole[]): void {
  for (const role of roles) if (!ENGINE_ROLES.includes(role)) throw new RangeError(`engine role must be one of ${ENGINE_ROLES.join(", ")}, got ${String(role)}`);
  if (roles.includes("prefill") && !roles.includes("decode")) throw new RangeError("a pool with prefill engines needs at least one decode engine");
}

interface RoleEntry {
  role: EngineRole;
  /** The role it drains toward; undefined while not switching. */
  next: RoleSwitch | undefined;
}

export class EngineRoleBook {
  readonly #entries = new Map<string, RoleEntry>();
  #done: RoleSwitchDone[] = [];

  constructor(roles: readonly { id: string; role: EngineRole }[]) {
    validateEngineRoles(roles.map((r) => r.role));
    for (const { id, role } of roles) this.#entries.set(id, { role, next: undefined });
  }

  role(engineId: string): EngineRole | undefined {
    return this.#entries.get(engineId)?.role;
  }

  /** True when some engine is not mixed (the pool disaggregates) or one is switching. */
  get split(): boolean {
    for (const entry of this.#entries.values()) if (entry.role !== "mixed" || entry.next !== undefined) return true;
    return false;
  }

  switching(engineId: string): boolean {
    return this.#entries.get(engineId)?.next !== undefined;
  }

  /** May be given a new call (its prefill, or the whole call on a mixed engine). */
  takesNewCalls(engineId: string): boolean {
    const entry = this.#entries.get(engineId);
    return entry !== undefined && entry.next === undefined && entry.role !== "decode";
  }

  /** May be given a disaggregated call's decode. */
  takesDecodes(engineId: string): boolean {
    const entry = this.#entries.get(engineId);
    return entry !== undefined && entry.next === undefined && entry.role === "decode";
  }

  /**
   * Starts draining `engineId` toward `to`; false when it cannot switch (unknown, mixed,
   * already in that role or switching, or the last engine of its side, which would
   * leave prefill engines with nowhere to decode or calls with nowhere to start).
   */
  startSwitch(roleSwitch: RoleSwitch, callsOn: number, nowMs: number): boolean {
    const entry = this.#entries.get(roleSwitch.engineId);
    if (entry === undefined || entry.next !== undefined || entry.role !== roleSwitch.from || roleSwitch.from === roleSwitch.to) return false;
    const others = [...this.#entries.entries()].filter(([id, other]) => id !== roleSwitch.engineId && other.next === undefined);
    if (!others.some(([, other]) => other.role === entry.role)) return false;
    entry.next = roleSwitch;
    this.callsDrained(roleSwitch.engineId, callsOn, nowMs);
    return true;
  }

  /** The engine holds `callsOn` calls now: a draining one with none left takes its new role. */
  callsDrained(engineId: string, callsOn: number, nowMs: number): void {
    const entry = this.#entries.get(engineId);
    if (entry?.next === undefined || callsOn > 0) return;
    const done = entry.next;
    entry.role = done.to;
    entry.next = undefined;
    this.#done.push({ ...done, atMs: nowMs });
  }

  /** The switches that finished since the last call (for the pool's log and counters). */
  takeFinished(): RoleSwitchDone[] {
    const done = this.#done;
    this.#done = [];
    return done;
  }

  /** The engines as a role controller reads them. */
  states(loadOf: (engineId: string) => number): RoleEngineState[] {
    return [...this.#entries.entries()].map(([id, entry]) => ({ id, role: entry.role, switching: entry.next !== undefined, load: loadOf(id) }));
  }

  /** Each engine's role and the one it drains toward (inspection). */
  snapshot(): { id: string; role: EngineRole; switchingTo: SplitRole | undefined }[] {
    return [...this.#entries.entries()].map(([id, entry]) => ({ id, role: entry.role, switchingTo: entry.next?.to }));
  }
}
