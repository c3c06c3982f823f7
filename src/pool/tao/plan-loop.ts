/*
 * When the pool plans (TAO): never inside a request handler. A request for a plan
 * (the queue changed and some call has no plan entry) runs on the next turn of the
 * event loop (setImmediate), coalescing every request made until then, and no sooner
 * than `minIntervalMs` after the previous plan, so a burst of arrivals costs one plan
 * per interval, not one per call. A periodic round (`periodMs`) covers what only time
 * changes: a tool phase entering the readiness horizon, a reservation running out, a
 * plan expiring. Both timers are unref'd: they never keep the process alive.
 */

export interface PlanLoopOptions {
  minIntervalMs: number;
  periodMs: number;
  /** Makes a plan and applies it. */
  plan(): void;
  /** The periodic round (decides itself whether to plan). */
  tick(): void;
  now(): number;
}

export class PlanLoop {
  readonly #options: PlanLoopOptions;
  #pending: { cancel(): void } | undefined;
  #periodic: ReturnType<typeof setInterval> | undefined;
  #lastPlanAt = Number.NEGATIVE_INFINITY;
  #stopped = false;

  constructor(options: PlanLoopOptions) {
    this.#options = options;
  }

  start(): void {
    if (this.#stopped || this.#periodic !== undefined) return;
    this.#periodic = setInterval(() => this.#options.tick(), this.#options.periodMs);
    this.#periodic.unref();
  }

  /** Asks for a plan soon (coalesced, rate-limited). */
  request(): void {
    if (this.#stopped || this.#pending !== undefined) return;
    const wait = this.#lastPlanAt + this.#options.minIntervalMs - this.#options.now();
    if (wait <= 0) {
      const immediate = setImmediate(() => this.#run());
      immediate.unref();
      this.#pending = { cancel: () => clearImmediate(immediate) };
    } else {
      const timer = setTimeout(() => this.#run(), wait);
      timer.unref();
      this.#pending = { cancel: () => clearTimeout(timer) };
    }
  }

  /** Plans now (the periodic round), absorbing a pending request. */
  planNow(): void {
    if (this.#stopped) return;
    this.#pending?.cancel();
    this.#run();
  }

  stop(): void {
    this.#stopped = true;
    this.#pending?.cancel();
    this.#pending = undefined;
    clearInterval(this.#periodic);
    this.#periodic = undefined;
  }

  #run(): void {
    this.#pending = undefined;
    if (this.#stopped) return;
    this.#lastPlanAt = this.#options.now();
    this.#options.plan();
  }
}
