import type { SettleCallInput } from "../program/types.js";

export interface CallLifecycleOptions {
  /** Renew the call's concurrency lease this often while it is in flight. */
  renewEveryMs: number;
  /** The call's deadline, from its start: `deadline` aborts then. */
  timeoutMs: number;
  renewLease(): Promise<unknown>;
  /** Writes the settlement to the program and the limiter; called at most once. */
  record(settlement: SettleCallInput): Promise<void>;
  /** Keeps work alive past the response (ctx.waitUntil). */
  keepAlive(work: Promise<unknown>): void;
}

/**
 * One call's life at the edge, from admission to settlement: it renews the
 * call's lease while the call is in flight, aborts `deadline` when the call has
 * run out of time, and settles exactly once. The first settlement wins; the
 * renewal and the deadline stop the moment it is known, so no exit path leaves
 * a lease renewed or a slot taken. Renewal also stops at the deadline, so even a
 * settlement that never arrives frees the slot one lease later.
 */
export class CallLifecycle {
  readonly deadline: AbortSignal;
  #settling = false;
  #renewal: ReturnType<typeof setInterval> | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly options: CallLifecycleOptions) {
    const deadline = new AbortController();
    this.deadline = deadline.signal;
    this.#timer = setTimeout(() => {
      this.#stopRenewing();
      deadline.abort(new Error(`call deadline of ${options.timeoutMs} ms passed`));
    }, options.timeoutMs);
    this.#renewal = setInterval(() => {
      options.keepAlive(
        options.renewLease().catch((error: unknown) => console.error("renewing a call's lease failed", error)),
      );
    }, options.renewEveryMs);
  }

  /** Whether a settlement was given (it may still be resolving). */
  get settling(): boolean {
    return this.#settling;
  }

  /** Whether the lease is still being renewed. */
  get renewing(): boolean {
    return this.#renewal !== undefined;
  }

  /** Settles the call with the first settlement given; later ones are ignored (and return false). */
  settle(settlement: SettleCallInput | Promise<SettleCallInput>): boolean {
    if (this.#settling) return false;
    this.#settling = true;
    const settle = async () => {
      let input: SettleCallInput;
      try {
        input = await settlement;
      } finally {
        this.#stop();
      }
      await this.options.record(input);
    };
    this.options.keepAlive(settle().catch((error: unknown) => console.error("settling a call failed", error)));
    return true;
  }

  #stopRenewing(): void {
    if (this.#renewal !== undefined) clearInterval(this.#renewal);
    this.#renewal = undefined;
  }

  #stop(): void {
    this.#stopRenewing();
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
