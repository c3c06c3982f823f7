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
  return {
    get gone() {
      return incoming.errored !== null || (outgoing.destroyed && !outgoing.writableFinished);
    },
    onGone(listener) {
      const onClose = (): void => {
        if (incoming.errored !== null || !outgoing.writableFinished) listener();
      };
      outgoing.once("close", onClose);
      return () => outgoing.off("close", onClose);
    },
  };
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
