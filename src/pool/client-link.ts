import type { IncomingMessage, ServerResponse } from "node:http";

/*
 * Whether the client of a call is still there. Behind the pool's server it is read from
 * Node's own request and response: an AbortController per call (what a Web Request's
 * `signal` costs, with an EventTarget listener added and removed per call) bought
 * nothing the response's 'close' event does not say. Under Hono's `app.request()` (tests)
 * it is the Request's AbortSignal.
 */

export interface ClientLink {
  /** True once the client went away before its answer was complete. */
  readonly gone: boolean;
  /** Calls `listener` once when the client goes away; returns what stops listening. */
  onGone(listener: () => void): () => void;
}

/**
 * The client behind Node's request and response: gone when the connection closed
 * before the response finished, or the request broke off (what @hono/node-server
 * aborted a Request's signal for).
 */
export function nodeClientLink(incoming: IncomingMessage, outgoing: ServerResponse): ClientLink {
  return new NodeClient(incoming, outgoing);
}

/** A class whose listener is set in its constructor: the pool's tsx renames each named closure it makes (relay-attempt.ts). */
class NodeClient implements ClientLink {
  readonly #incoming: IncomingMessage;
  readonly #outgoing: ServerResponse;
  readonly #listeners = new Set<() => void>();
  readonly #onClose: () => void;

  constructor(incoming: IncomingMessage, outgoing: ServerResponse) {
    this.#incoming = incoming;
    this.#outgoing = outgoing;
    this.#onClose = () => {
      if (!this.gone) return;
      for (const listener of [...this.#listeners]) listener();
      this.#listeners.clear();
    };
  }

  get gone(): boolean {
    return this.#incoming.errored !== null || (this.#outgoing.destroyed && !this.#outgoing.writableFinished);
  }

  onGone(listener: () => void): () => void {
    if (this.#listeners.size === 0) this.#outgoing.once("close", this.#onClose);
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size === 0) this.#outgoing.off("close", this.#onClose);
    };
  }
}

/** A Web Request's client: gone when its signal aborts. */
export function signalClientLink(signal: AbortSignal): ClientLink {
  return {
    get gone() {
      return signal.aborted;
    },
    onGone(listener) {
      signal.addEventListener("abort", listener, { once: true });
      return () => signal.removeEventListener("abort", listener);
    },
  };
}
