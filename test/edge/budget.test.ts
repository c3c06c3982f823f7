import { afterEach, describe, expect, it, vi } from "vitest";
import { periodOf } from "../../src/edge/limits/period";
import { estimatePromptTokens } from "../../src/protocol/tokens";
import {
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  frozenClock,
  gate,
  mockPool,
  newLimitedTenant,
  poolJson,
  rateLimitOf,
  type ForwardedRequest,
} from "./support";

/*
 * Issue 9, item 5 of the budget: a call is answered with what is true about the
 * monthly budget. Spent: 429 budget_exhausted until the month ends. Too large for what
 * is left: 400 naming the field and what fits. Held by calls in flight: 429 with a
 * short Retry-After. No max_tokens: the limit is clamped to what is left.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const P = estimatePromptTokens({ messages: [{ role: "user", content: "Say hello." }] });
const sentLimit = (forwarded: ForwardedRequest | undefined) =>
  (JSON.parse(new TextDecoder().decode(forwarded?.body)) as { max_tokens?: number }).max_tokens;
/** An engine that produces exactly the limit it is sent. */
const faithfulEngine = (forwarded: ForwardedRequest) => poolJson({ usage: { prompt: P, completion: sentLimit(forwarded) ?? 0 } });

describe("the monthly budget", () => {
  it("refuses a max_tokens larger than what is left with 400 naming the field, the budget left and what fits", async () => {
    const clock = frozenClock();
    const pool = mockPool(faithfulEngine);
    const tenant = await newLimitedTenant({ monthly_token_budget: 1_000, rpm: 100 });

    for (const field of ["max_tokens", "max_completion_tokens"]) {
      const res = await chat(tenant, chatBody({ [field]: 2_000 }));
      const error = await expectOpenAIError(res, 400, "invalid_request_error");
      expect(error.error).toMatchObject({ code: "max_tokens_exceeds_budget", param: field });
      expect(error.error.message).toContain(`${field} 2000`);
      expect(error.error.message).toContain("1000 of 1000 tokens");
      expect(error.error.message).toContain(`${field} ≤ ${1_000 - P}`);
      expect(res.headers.get("retry-after")).toBeNull();
      // Nothing was taken: the request counter is untouched.
      expect(rateLimitOf(res).remainingRequests).toBe("100");
    }
    expect(pool).toHaveLength(0);

    // What the message says fits, fits.
    expect((await chat(tenant, chatBody({ max_tokens: 1_000 - P }))).status).toBe(200);
    await drain();
    clock.advance(1_000);
    const spent = await chat(tenant, chatBody({ max_tokens: 1 }));
    expect((await expectOpenAIError(spent, 429, "insufficient_quota")).error.code).toBe("budget_exhausted");
  });

  it("clamps a call without max_tokens to what the budget holds, then says the budget is spent until the month ends", async () => {
    const clock = frozenClock();
    const pool = mockPool(faithfulEngine);
    // The plan default (4,096) is more than the budget left.
    const tenant = await newLimitedTenant({ monthly_token_budget: 1_000, default_max_tokens: 4_096 });

    const first = await chat(tenant, chatBody({ max_tokens: 300 }));
    expect(first.status).toBe(200);
    await drain();
    const clamped = await chat(tenant);
    expect(clamped.status).toBe(200);
    expect(sentLimit(pool[1])).toBe(1_000 - (P + 300) - P);
    await drain();

    // Exactly spent: not one completion token fits, whatever settles.
    const refused = await chat(tenant);
    const error = await expectOpenAIError(refused, 429, "insufficient_quota");
    expect(error.error.code).toBe("budget_exhausted");
    const periodEnd = periodOf(clock.now()).endMs;
    expect(Number(refused.headers.get("retry-after"))).toBe(Math.ceil((periodEnd - clock.now()) / 1_000));
    expect(pool).toHaveLength(2);
  });

  it("answers a budget held by calls in flight with a short 429, and clamps a call without max_tokens to the rest", async () => {
    frozenClock();
    const release = gate();
    const pool = mockPool(async () => {
      await release.promise;
      return poolJson({ usage: { prompt: P, completion: 10 } });
    });
    const tenant = await newLimitedTenant({ monthly_token_budget: 1_000, max_concurrent: 10 });

    // Holds P + 600 of the 1,000 while it runs.
    const running = chat(tenant, chatBody({ max_tokens: 600 }));
    await vi.waitFor(() => expect(pool).toHaveLength(1));

    // Fits the budget once the running call settles (it gives back what it does not use), not now.
    const held = await chat(tenant, chatBody({ max_tokens: 600 }));
    const error = await expectOpenAIError(held, 429, "rate_limit_error");
    expect(error.error.code).toBe("budget_held_by_calls_in_flight");
    expect(held.headers.get("retry-after")).toBe("1");
    expect(error.error.message).toContain(`max_tokens ≤ ${1_000 - (P + 600) - P} fits now`);

    // Can never fit this month: 400, not a retry.
    expect((await expectOpenAIError(await chat(tenant, chatBody({ max_tokens: 1_000 })), 400)).error.code).toBe(
      "max_tokens_exceeds_budget",
    );

    // No max_tokens: clamped to what is not held.
    const clampedRes = chat(tenant);
    await vi.waitFor(() => expect(pool).toHaveLength(2));
    expect(sentLimit(pool[1])).toBe(1_000 - (P + 600) - P);

    release.open(undefined);
    expect((await running).status).toBe(200);
    expect((await clampedRes).status).toBe(200);
    await drain();
    // Settled at 10 completion tokens each: the budget came back and the same request now fits.
    expect((await chat(tenant, chatBody({ max_tokens: 600 }))).status).toBe(200);
    await drain();
  });
});
