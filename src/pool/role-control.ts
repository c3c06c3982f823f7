import type { Clock } from "../core/clock.js";
import type { RoleDemandMeter, RoleEngineReadings } from "../core/roles/role-demand-meter.js";
import type { RoleController, RoleDecision, RoleDemand, RoleEngineState, RoleSwitch } from "../core/roles/roles.js";

/*
 * The pool's role control loop (issue 13): every round it closes the demand meter's
 * window, asks the core's controller for a decision, and starts the switches it asks
 * for on the pool's engines (each drains its old role's calls first). The decision
 * logic is the core's, shared with the simulator; this file only drives it on a timer.
 */

/** The pool's engines as the loop needs them: their roles now, their state, and a way to start a switch. */
export interface RoleSwitchTarget {
  roleStates(): readonly RoleEngineState[];
  roleReadings(): RoleEngineReadings;
  /** Starts draining `engineId` toward `to`; false when the engine cannot switch now (gone, already switching). */
  startRoleSwitch(roleSwitch: RoleSwitch): boolean;
}

export interface RoleControlOptions {
  controller: RoleController;
  meter: RoleDemandMeter;
  target: RoleSwitchTarget;
  clock: Clock;
  roundMs: number;
  /** Called after every round, for the log and the metrics. */
  onRound?(round: { decision: RoleDecision; demand: RoleDemand; started: RoleSwitch[] }): void;
}

export class RoleControlLoop {
  readonly #options: RoleControlOptions;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(options: RoleControlOptions) {
    if (!(options.roundMs > 0)) throw new RangeError(`role control roundMs must be > 0, got ${options.roundMs}`);
    this.#options = options;
  }

  start(): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.round(), this.#options.roundMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** The demand meter each round closes (the prefill cost factor it has learned, for tests). */
  get meter(): RoleDemandMeter {
    return this.#options.meter;
  }

  /** One round now (the timer's, or a test's). */
  round(): RoleDecision {
    const { controller, meter, target, clock, onRound } = this.#options;
    const now = clock.now();
    const demand = meter.read(now, target.roleReadings());
    const decision = controller.decide(target.roleStates(), demand, now);
    const started = decision.action === "switch" ? decision.switches.filter((s) => target.startRoleSwitch(s)) : [];
    onRound?.({ decision, demand, started });
    return decision;
  }
}
