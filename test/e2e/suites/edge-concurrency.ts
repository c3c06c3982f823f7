import { beforeAll, describe, expect, it } from "vitest";
import { burst, liftDevLimits } from "../../../src/cli/bench/edge-burst.js";
import { createTenant, type LocalStackHandle } from "../stack.js";

/*
 * A few hundred concurrent calls through the real stack (the Worker under
 * `wrangler dev`, the pool core, simulated engines). Saturated like this, each call
 * spends seconds in the edge, so workerd reuses its pooled connections to the pool
 * after about 5 s idle: with Node's default keep-alive (5 s) the pool closed some of
 * them just then and 1–17 % of the calls came back 502 pool_unreachable
 * ("Network connection lost." in workerd), none of which reached the pool.
 */

export function describeEdgeConcurrency(local: LocalStackHandle): void {
  const CONCURRENCY = 300;
  const CALLS = 600;

  describe("the edge under a few hundred concurrent calls", () => {
    // A tenant of its own with the dev tenant's limits lifted as bench:edge lifts them: the stack's other suites keep theirs.
    let key = "";
    beforeAll(async () => {
      const tenant = await createTenant(local.stack, "burst");
      await liftDevLimits({ ...local.stack, tenantId: tenant.id });
      key = tenant.key;
    });

    it("reaches the pool for every call: no 502 pool_unreachable", async () => {
      const result = await burst(local.stack.edgeUrl, key, local.stack.model, {
        concurrency: CONCURRENCY,
        calls: CALLS,
        maxSeconds: 25,
        maxTokens: 4,
      });
      const outcomes = new Map<string, number>();
      for (const call of result.calls) {
        const key = call.status === 200 ? "200" : `${call.status} ${call.code ?? ""}`;
        outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
      }
      const summary = Object.fromEntries(outcomes);

      expect(summary["502 pool_unreachable"] ?? 0, JSON.stringify(summary)).toBe(0);
      // Every other answer is a completion, or wrangler's dev proxy failing to reach the
      // Worker at all (its own keep-alive race, in front of the code under test).
      const other = [...outcomes.keys()].filter((key) => key !== "200" && key !== "503 wrangler_proxy_lost");
      expect(other, JSON.stringify(summary)).toEqual([]);
      // Enough calls went edge → pool, with connections reused, for the zero to mean something.
      expect(result.calls.length).toBeGreaterThanOrEqual(CONCURRENCY);
      expect(summary["200"] ?? 0, JSON.stringify(summary)).toBeGreaterThanOrEqual(CALLS / 3);
    }, 60_000);
  });
}
