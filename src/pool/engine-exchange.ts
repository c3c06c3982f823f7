import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import type { AttemptSignal } from "./attempt-abort.js";

/*
 * One engine request, through undici's dispatch(): its answer's status, headers and
 * body chunks go straight to a listener. undici's request() on top of it made, per
 * request, an AsyncResource, a promise, a Node Readable for the body (each chunk
 * pushed through it and emitted again) and, with a signal, an EventTarget listener.
 * `npm run bench:engine-clients` (small POSTs at one connection, this machine): 49–51
 * µs a round trip with request() and an AbortController, 37–39 µs with request()
 * alone, 31–32 µs with dispatch(); node:http with a keep-alive agent 47–48 µs.
 *
 * The exchange ends exactly once for its listener: `end` after the whole body, or
 * `error` (no connection, a timeout of the dispatcher, a body that broke off, or an
 * abort: the attempt's signal, or `abort()`), never both, nothing after either.
 */

/** What the relay hears of one engine request. */
export interface EngineAnswerListener {
  /** The engine's final status (not a 1xx) and headers (lower-case names). */
  start(status: number, headers: IncomingHttpHeaders): void;
  data(chunk: Buffer): void;
  end(): void;
  error(error: Error): void;
}

export interface EngineRequestTarget {
  origin: string;
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** The error an aborted exchange reports, carrying the abort's reason. */
export class EngineRequestAborted extends Error {
  constructor(readonly reason: unknown) {
    super("engine request aborted", { cause: reason });
    this.name = "AbortError";
  }
}

export class EngineExchange implements Dispatcher.DispatchHandler {
  #listener: EngineAnswerListener;
  #controller: Dispatcher.DispatchController | undefined;
  #abortedWith: Error | undefined;
  #ended = false;
  #pauseWanted = false;
  readonly #signal: AttemptSignal;
  readonly #onAbort: () => void;

  private constructor(listener: EngineAnswerListener, signal: AttemptSignal) {
    this.#listener = listener;
    this.#signal = signal;
    // Set here, not as a field initializer: the pool's tsx names (Object.defineProperty) every arrow a field initializer makes.
    this.#onAbort = () => this.abort(new EngineRequestAborted(signal.reason));
    signal.onAbort(this.#onAbort);
  }

  /** Sends the request (POST); the listener hears its answer. An attempt already aborted is not sent and ends in `error`. */
  static send(http: Dispatcher, target: EngineRequestTarget, signal: AttemptSignal, listener: EngineAnswerListener): EngineExchange {
    const exchange = new EngineExchange(listener, signal);
    if (signal.aborted) {
      exchange.#fail(new EngineRequestAborted(signal.reason));
      return exchange;
    }
    try {
      http.dispatch({ origin: target.origin, path: target.path, method: "POST", headers: target.headers, body: target.body }, exchange);
    } catch (error) {
      exchange.#fail(error instanceof Error ? error : new Error(String(error)));
    }
    return exchange;
  }

  /** Who hears the rest of the answer from now (the relay hands a stream's body to the stream relay). */
  set listener(listener: EngineAnswerListener) {
    this.#listener = listener;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Stops the request: the listener hears `error` (unless it has ended already). */
  abort(reason: Error): void {
    if (this.#ended || this.#abortedWith !== undefined) return;
    this.#abortedWith = reason;
    // Before undici has handed the request its controller (it is written one event-loop turn later), the abort waits for it.
    this.#controller?.abort(reason);
  }

  /** Holds the engine's body (backpressure) until resume(). */
  pause(): void {
    this.#pauseWanted = true;
    this.#controller?.pause();
  }

  resume(): void {
    this.#pauseWanted = false;
    this.#controller?.resume();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    if (this.#abortedWith !== undefined) controller.abort(this.#abortedWith);
    else if (this.#pauseWanted) controller.pause();
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (this.#ended || statusCode < 200) return;
    this.#listener.start(statusCode, headers);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (!this.#ended) this.#listener.data(chunk);
  }

  onResponseEnd(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#signal.offAbort(this.#onAbort);
    this.#listener.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.#fail(this.#abortedWith ?? error);
  }

  #fail(error: Error): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#signal.offAbort(this.#onAbort);
    this.#listener.error(error);
  }
}
