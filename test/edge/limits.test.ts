import { describe, expect, it } from "vitest";
import { adjust, fullBucket, msUntil, msUntilFull, refill } from "../../src/edge/limits/bucket";
import { parseDay, parsePeriod, periodOf } from "../../src/edge/limits/period";
import { decideOutputTokens, defaultOutputTokens } from "../../src/edge/limits/max-tokens";
import { effectiveExtensions, effectiveLimits, effectiveWeight } from "../../src/edge/limits/plan-limits";
import { formatResetDuration, retryAfterSeconds } from "../../src/edge/limits/reset-duration";
import { csvField, csvLine } from "../../src/edge/usage/csv";

describe("token bucket", () => {
  it("refills continuously over a minute, never above capacity, and not when the clock goes back", () => {
    const empty = { level: 0, at: 1_000 };
    expect(refill(empty, 60, 1_000 + 30_000).level).toBe(30);
    expect(refill(empty, 60, 1_000 + 120_000).level).toBe(60);
    expect(refill(empty, 60, 500)).toEqual(empty);
    expect(fullBucket(10, 5)).toEqual({ level: 10, at: 5 });
  });

  it("says how long until an amount, and until full", () => {
    const b = { level: 1, at: 0 };
    expect(msUntil(b, 3, 1)).toBe(0);
    expect(msUntil(b, 3, 2)).toBe(20_000);
    expect(msUntilFull(b, 3)).toBe(40_000);
    expect(msUntilFull({ level: -3, at: 0 }, 3)).toBe(120_000);
  });

  it("adjusts by refunds (capped) and overuse (may go negative)", () => {
    expect(adjust({ level: 5, at: 0 }, 10, 20).level).toBe(10);
    expect(adjust({ level: 5, at: 0 }, 10, -8).level).toBe(-3);
  });
});

describe("billing periods", () => {
  it("are calendar months in UTC", () => {
    const p = periodOf(Date.UTC(2024, 1, 29, 23, 59, 59, 999));
    expect(p).toEqual({ key: "2024-02", startMs: Date.UTC(2024, 1, 1), endMs: Date.UTC(2024, 2, 1) });
    expect(periodOf(Date.UTC(2024, 11, 31, 23, 59)).endMs).toBe(Date.UTC(2025, 0, 1));
    expect(parsePeriod("2024-12")?.endMs).toBe(Date.UTC(2025, 0, 1));
    for (const bad of ["2024-13", "2024-00", "2024-1", "24-01", "2024-01-01"]) expect(parsePeriod(bad)).toBeUndefined();
  });

  it("parses only real days", () => {
    expect(parseDay("2024-02-29")).toBe(Date.UTC(2024, 1, 29));
    for (const bad of ["2023-02-29", "2024-04-31", "2024-1-01", "2024-01-01T00:00"]) expect(parseDay(bad)).toBeUndefined();
  });
});

describe("plan limits", () => {
  const plan = {
    rpm: 60,
    tpm: 1_000,
    maxConcurrent: 4,
    maxActivePrograms: 10,
    monthlyTokenBudget: 5_000,
    defaultMaxTokens: 256,
    maxOutputTokens: 2_000,
    toolEventsPerMinute: 600,
    limiterShards: 1,
  };
  const none = {
    rpmOverride: null,
    tpmOverride: null,
    maxConcurrentOverride: null,
    maxActiveProgramsOverride: null,
    monthlyTokenBudgetOverride: null,
    defaultMaxTokensOverride: null,
    maxOutputTokensOverride: null,
    allowedExtensionsOverride: null,
    toolEventsPerMinuteOverride: null,
    limiterShardsOverride: null,
  };

  it("take overrides over the plan", () => {
    expect(effectiveLimits(plan, none)).toEqual(plan);
    expect(effectiveLimits(plan, { ...none, tpmOverride: 9, monthlyTokenBudgetOverride: 0 })).toMatchObject({
      tpm: 9,
      monthlyTokenBudget: 0,
      rpm: 60,
    });
  });

  it("take a tenant's extension list over the plan's, even an empty one", () => {
    expect(effectiveExtensions({ allowedExtensions: ["min_tokens"] }, { allowedExtensionsOverride: null })).toEqual(["min_tokens"]);
    expect(effectiveExtensions({ allowedExtensions: ["min_tokens"] }, { allowedExtensionsOverride: [] })).toEqual([]);
    expect(effectiveLimits(plan, { ...none, maxOutputTokensOverride: 64, toolEventsPerMinuteOverride: 100 })).toMatchObject({
      maxOutputTokens: 64,
      toolEventsPerMinute: 100,
    });
  });
});

describe("a call's completion limit", () => {
  const limits = { defaultMaxTokens: 256, maxOutputTokens: 2_000, monthlyTokenBudget: 5_000 };
  const call = (requested: number | undefined, settled = 0, held = 0, promptTokens = 30) =>
    decideOutputTokens({ promptTokens, requested, limits, settled, held });

  it("is the request's, else the plan default, never above the plan's maximum", () => {
    expect(call(100)).toEqual({ ok: true, maxTokens: 100 });
    expect(call(undefined)).toEqual({ ok: true, maxTokens: 256 });
    expect(call(2_000)).toEqual({ ok: true, maxTokens: 2_000 });
    expect(call(2_001)).toEqual({ ok: false, reason: "max_tokens_above_plan", limit: 2_000, requested: 2_001 });
    expect(defaultOutputTokens({ defaultMaxTokens: 256, maxOutputTokens: 100 })).toBe(100);
    expect(defaultOutputTokens({ defaultMaxTokens: 256, maxOutputTokens: null })).toBe(256);
    const uncapped = { ...limits, maxOutputTokens: null, monthlyTokenBudget: null };
    expect(decideOutputTokens({ promptTokens: 30, requested: 50_000, limits: uncapped, settled: 0, held: 0 })).toEqual({
      ok: true,
      maxTokens: 50_000,
    });
  });

  it("is clamped to what the budget holds when the client set none; refused only when not one token fits", () => {
    // 5,000 budget, 4,800 settled: 200 left, 30 of them the prompt.
    expect(call(undefined, 4_800)).toEqual({ ok: true, maxTokens: 170 });
    expect(call(undefined, 4_969)).toEqual({ ok: true, maxTokens: 1 });
    expect(call(undefined, 4_970)).toMatchObject({ ok: false, reason: "budget_exhausted", available: 30, fits: 0 });
    // Held by calls in flight, not spent: a short retry, not the end of the month.
    expect(call(undefined, 4_000, 970)).toMatchObject({ ok: false, reason: "budget_held", available: 30, held: 970 });
  });

  it("refuses a requested limit the budget cannot hold: 400 when it can never fit, held when it may", () => {
    expect(call(170, 4_800)).toEqual({ ok: true, maxTokens: 170 });
    expect(call(171, 4_800)).toEqual({
      ok: false,
      reason: "max_tokens_exceeds_budget",
      limit: 5_000,
      requested: 171,
      available: 200,
      held: 0,
      fits: 170,
    });
    expect(call(500, 4_000, 800)).toMatchObject({ ok: false, reason: "budget_held", available: 200, held: 800, fits: 170 });
    expect(call(100, 4_980)).toMatchObject({ ok: false, reason: "budget_exhausted", available: 20, fits: 0 });
  });

  it("combine weights without exponent forms", () => {
    expect(effectiveWeight(4, 1.5)).toBe(6);
    expect(effectiveWeight(0.001, 0.001)).toBe(0.001);
    expect(String(effectiveWeight(1_000, 1_000))).toBe("1000000");
  });
});

describe("OpenAI reset durations", () => {
  it("format like OpenAI's", () => {
    expect(formatResetDuration(0)).toBe("0s");
    expect(formatResetDuration(17.2)).toBe("18ms");
    expect(formatResetDuration(1_500)).toBe("1.5s");
    expect(formatResetDuration(6_000)).toBe("6s");
    expect(formatResetDuration(360_000)).toBe("6m0s");
    expect(formatResetDuration(3_723_400)).toBe("1h2m3.4s");
    expect(retryAfterSeconds(1)).toBe(1);
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(20_000)).toBe(20);
    expect(retryAfterSeconds(20_001)).toBe(21);
  });
});

describe("CSV", () => {
  it("quotes what needs it and defuses formulas", () => {
    expect(csvField("plain")).toBe("plain");
    expect(csvField('a,"b"')).toBe('"a,""b"""');
    expect(csvField("=SUM(A1)")).toBe("'=SUM(A1)");
    expect(csvField(-5)).toBe("-5");
    expect(csvLine(["x", 1, "y\nz"])).toBe('x,1,"y\nz"\r\n');
  });
});
