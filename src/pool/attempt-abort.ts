/*
 * What ends an attempt's engine request early: its client gone, the pool closing, a
 * split call's other leg. The dispatcher's attempts use AttemptAbort: an
 * AbortController costs an EventTarget, its listener added and removed through Node's
 * event machinery, per attempt (`npm run bench:engine-clients`: undici request() with
 * one, 49–51 µs a round trip and 39–41 µs of CPU; without, 37–39 and 26 µs), and the
 * relay needs one listener, once.
 * The split flows, which link their legs' AbortControllers, pass an AbortSignal
 * through `attemptSignalOf`.
 */

export interface AttemptSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  /** Calls `listener` once at the abort (never when already aborted: ask `aborted` first). */
  onAbort(listener: () => void): void;
  /** Stops calling `listener`. */
  offAbort(listener: () => void): void;
}

/** An attempt's abort: one listener at a time (the relay's), called once. */
export class AttemptAbort implements AttemptSignal {
  #aborted = false;
  #reason: unknown;
  #listener: (() => void) | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  get reason(): unknown {
    return this.#reason;
  }

  abort(reason?: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason ?? new Error("This operation was aborted");
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }

  onAbort(listener: () => void): void {
    if (this.#aborted) return;
    if (this.#listener !== undefined) throw new Error("attempt abort: one listener at a time");
    this.#listener = listener;
  }

  offAbort(listener: () => void): void {
    if (this.#listener === listener) this.#listener = undefined;
  }
}

/** An AbortSignal read as an attempt's (the split flows'). */
export function attemptSignalOf(signal: AbortSignal): AttemptSignal {
  return {
    get aborted() {
      return signal.aborted;
    },
    get reason() {
      return signal.reason as unknown;
    },
    onAbort(listener) {
      if (!signal.aborted) signal.addEventListener("abort", listener, { once: true });
    },
    offAbort(listener) {
      signal.removeEventListener("abort", listener);
    },
  };
}
