import { breakerOf, type RoutedPool } from "../pools/routing.js";
import { FAILOVER_STATUSES, type Unanswered, whyUnanswered } from "./relay.js";
import type { StreamWatch } from "./relay-stream.js";

/** How sending a call along its failover order ended. */
export type FailoverOutcome =
  /** A pool answered (any status; the last pool's 502/503 too, for the relay to word). */
  | { kind: "answered"; pool: RoutedPool; response: Response }
  /** The wait ended without an answer: the client left, the deadline passed, or no pool could be reached. */
  | { kind: "unanswered"; why: Unanswered }
  /** No pool's breaker let a call through: nothing was sent. */
  | { kind: "none" };

/**
 * Sends a call to the first pool of `pools` whose breaker lets it through; a
 * connection error or a 502/503 (before any byte reached the client: the response
 * has not been relayed) sends it to the next one. Each pool's breaker learns the
 * outcome; a client that left or a passed deadline is nobody's failure and ends the
 * attempts. `beforeAttempt` names the pool being tried (the call's settlement and
 * headers carry it).
 */
export async function sendWithFailover(input: {
  pools: readonly RoutedPool[];
  send: (pool: RoutedPool) => Promise<Response>;
  beforeAttempt: (pool: RoutedPool) => void;
  watch: Pick<StreamWatch, "client" | "deadline">;
  now: () => number;
}): Promise<FailoverOutcome> {
  let attempted = false;
  // The last 502/503, kept unread until another pool is tried: if none is, it is the answer.
  let refused: { pool: RoutedPool; response: Response } | undefined;
  for (const pool of input.pools) {
    const breaker = breakerOf(pool.id);
    if (!breaker.allow(input.now())) continue;
    if (refused !== undefined) {
      await refused.response.body?.cancel().catch(() => undefined);
      refused = undefined;
    }
    attempted = true;
    input.beforeAttempt(pool);
    let response: Response;
    try {
      response = await input.send(pool);
    } catch (error) {
      const why = whyUnanswered(input.watch);
      if (why !== "unreachable") return { kind: "unanswered", why };
      breaker.failed(input.now());
      console.warn(`pool ${pool.id} could not be reached; trying the next one`, error);
      continue;
    }
    if (FAILOVER_STATUSES.has(response.status)) {
      breaker.failed(input.now());
      console.warn(`pool ${pool.id} answered ${response.status}; trying the next one`);
      refused = { pool, response };
      continue;
    }
    breaker.succeeded();
    return { kind: "answered", pool, response };
  }
  if (refused !== undefined) return { kind: "answered", ...refused };
  return attempted ? { kind: "unanswered", why: "unreachable" } : { kind: "none" };
}
