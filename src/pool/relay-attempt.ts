import type { PoolCallStats } from "../protocol/stats.js";
import type { CallFacts } from "./call-facts.js";
import type { CallOutcome } from "./metrics.js";
import type { RelayRequest } from "./relay.js";

/*
 * What the relay of one attempt (relay.ts, relay-event-stream.ts) keeps about it: the
 * service it is charged, the stats the call's answer carries, and its end, reported once.
 *
 * A class, not closures: the pool runs under tsx, whose esbuild `keepNames` gives every
 * named closure its name (Object.defineProperty) each time it is made, ~0.3 µs apiece
 * on a warm loop and ~3 % of the pool's busy time in bench:proxy's profile, spread over
 * the dozens a call made; methods and a class's fields set in its constructor are not renamed.
 */

export const round = (ms: number): number => Math.max(0, Math.round(ms));

export class RelayAttempt {
  readonly #req: RelayRequest;
  #ended = false;

  constructor(req: RelayRequest) {
    this.#req = req;
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** The service the attempt is charged for this wall time and these facts (RelayRequest.serviceOf). */
  charge(wallMs: number, facts: CallFacts | undefined): number {
    return round(this.#req.serviceOf?.(wallMs, facts) ?? wallMs);
  }

  /** Ends the attempt once; returns the service it is charged. */
  end(outcome: CallOutcome, wallMs = this.#req.clock.now() - this.#req.dispatchedAt, facts?: CallFacts): number {
    const serviceMs = this.charge(wallMs, facts);
    if (this.#ended) return serviceMs;
    this.#ended = true;
    this.#req.onEnd({ wallMs: round(wallMs), serviceMs, outcome, ...(facts === undefined ? {} : { facts }) });
    return serviceMs;
  }

  /** The call's stats for this service. */
  stats(serviceMs: number): PoolCallStats {
    const req = this.#req;
    return { engine: req.statsEngineId ?? req.engine.id, queueMs: round(req.queueMs), serviceMs: round(serviceMs) };
  }
}

function errorCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
  }
  return undefined;
}

export { errorCode };

/** An engine request's failure for the log: its code and the cause's message. */
export function describe(error: unknown): string {
  const code = errorCode(error);
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : undefined;
  const message = error instanceof Error ? error.message : String(error);
  return [code, cause ?? message].filter(Boolean).join(": ");
}
