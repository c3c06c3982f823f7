import { describe, expect, it } from "vitest";
import { Header, RateLimitHeader } from "../../../src/protocol/headers.js";
import { createTenant, type EngineCounts, type LocalStackHandle } from "../stack.js";

/*
 * Tenancy through the real stack (wrangler dev + pool core + simulated engines):
 * concurrency counted where it matters, at the engine. (Tenant fairness in the
 * pool's queue is tested in test/pool/fairness.test.ts, with the pool and a
 * simulated engine in the loop and no edge, whose local runtime would be the
 * bottleneck of a flood.)
 */

export function describeTenancy(local: LocalStackHandle, atEngines: EngineCounts): void {
  async function newTenant(name: string, overrides?: Record<string, unknown>): Promise<string> {
    return (await createTenant(local.stack, name, overrides)).key;
  }

  function chat(key: string, maxTokens: number, program?: string, content = "Next step?"): Promise<Response> {
    return fetch(`${local.stack.edgeUrl}/v1/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        ...(program ? { [Header.program]: program } : {}),
      },
      body: JSON.stringify({
        model: local.stack.model,
        messages: [{ role: "user", content }],
        max_tokens: maxTokens,
        ignore_eos: true,
      }),
    });
  }

  describe("tenant limits end to end", () => {
    it("never lets more than the concurrency limit reach the engine; the rest get 429 with rate-limit headers", async () => {
      // ignore_eos is an engine extension: the edge forwards it only when the tenant's plan (or override) allows it.
      const key = await newTenant("bursty", { max_concurrent: 5, allowed_extensions: ["ignore_eos"] });
      atEngines.peak = 0;
      const responses = await Promise.all(Array.from({ length: 50 }, () => chat(key, 400)));
      const statuses = responses.map((r) => r.status);
      const bodies = await Promise.all(responses.map((r) => r.json() as Promise<{ error?: { code: string } }>));

      expect(atEngines.peak).toBeGreaterThan(0);
      expect(atEngines.peak).toBeLessThanOrEqual(5);
      const ok = statuses.filter((s) => s === 200).length;
      expect(ok).toBeGreaterThanOrEqual(5);
      expect(ok + statuses.filter((s) => s === 429).length).toBe(50);
      responses.forEach((res, i) => {
        expect(res.headers.get(RateLimitHeader.limitRequests)).not.toBeNull();
        if (res.status === 429) {
          expect(bodies[i]?.error?.code).toBe("concurrency_limit_exceeded");
          expect(Number(res.headers.get(RateLimitHeader.retryAfter))).toBeGreaterThan(0);
        }
      });
    });
  });
}
