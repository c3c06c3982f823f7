import { describe, expect, it } from "vitest";
import { CacheCreditLedger } from "../../../src/core/tao/cache-credit.js";
import { DEFAULT_CACHE_CREDIT_SETTINGS } from "../../../src/core/tao/settings.js";

const ledger = () => new CacheCreditLedger(DEFAULT_CACHE_CREDIT_SETTINGS);

describe("cache credit", () => {
  it("decays exponentially: one half-life (10 s) halves it", () => {
    const credits = ledger();
    credits.observe({ programId: "p", engineId: "A", at: 1_000, contextTokens: 8_000 });
    expect(credits.credit("p", "A", 1_000)).toBe(8_000);
    expect(credits.credit("p", "A", 11_000)).toBeCloseTo(4_000, 9);
    expect(credits.credit("p", "A", 21_000)).toBeCloseTo(2_000, 9);
    expect(credits.credit("p", "A", 6_000)).toBeCloseTo(8_000 / Math.SQRT2, 9);
    // Never observed there: none. A clock stepping back does not inflate it.
    expect(credits.credit("p", "B", 1_000)).toBe(0);
    expect(credits.credit("p", "A", 0)).toBe(8_000);
  });

  it("is per (program, engine), and a newer call on the engine replaces the old context", () => {
    const credits = ledger();
    credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: 4_000 });
    credits.observe({ programId: "p", engineId: "B", at: 10_000, contextTokens: 6_000 });
    expect(credits.credits("p", 10_000)).toEqual({ A: 2_000, B: 6_000 });
    credits.observe({ programId: "p", engineId: "A", at: 10_000, contextTokens: 7_000 });
    expect(credits.credit("p", "A", 10_000)).toBe(7_000);
    // A late report of an older call does not overwrite it.
    credits.observe({ programId: "p", engineId: "A", at: 5_000, contextTokens: 100 });
    expect(credits.credit("p", "A", 10_000)).toBe(7_000);
  });

  it("the engine's cached_tokens calibrate its retention", () => {
    const credits = ledger();
    credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: 10_000 });
    // Predicted 10,000 reusable at t = 0; the engine reused none: retention 1 -> 0.8.
    credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: 12_000, cachedTokens: 0 });
    expect(credits.retention("A")).toBeCloseTo(0.8);
    expect(credits.credit("p", "A", 0)).toBeCloseTo(9_600);
    // A report matching the prediction pulls it back up; other engines are untouched.
    const predicted = credits.credit("p", "A", 10_000) / credits.retention("A");
    credits.observe({ programId: "p", engineId: "A", at: 10_000, contextTokens: 12_000, cachedTokens: predicted });
    expect(credits.retention("A")).toBeCloseTo(0.84);
    expect(credits.retention("B")).toBe(1);
    // Too little predicted credit to judge by (below minCalibrationTokens): no change.
    credits.observe({ programId: "q", engineId: "A", at: 0, contextTokens: 100 });
    credits.observe({ programId: "q", engineId: "A", at: 0, contextTokens: 200, cachedTokens: 0 });
    expect(credits.retention("A")).toBeCloseTo(0.84);
  });

  it("forgets engines and programs, and prunes decayed credit", () => {
    const credits = ledger();
    credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: 1_000 });
    credits.observe({ programId: "p", engineId: "B", at: 0, contextTokens: 1_000 });
    credits.observe({ programId: "q", engineId: "A", at: 100_000, contextTokens: 1_000 });
    credits.forgetEngine("B");
    expect(credits.credit("p", "B", 0)).toBe(0);
    expect(credits.prune(100_000, 1)).toBe(1);
    expect(credits.programCount).toBe(1);
    credits.forgetProgram("q");
    expect(credits.programCount).toBe(0);
  });

  it("rejects bad observations without changing state", () => {
    const credits = ledger();
    expect(() => credits.observe({ programId: "", engineId: "A", at: 0, contextTokens: 1 })).toThrow(TypeError);
    expect(() => credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: -1 })).toThrow(/contextTokens/);
    expect(() => credits.observe({ programId: "p", engineId: "A", at: Number.NaN, contextTokens: 1 })).toThrow(/at must be/);
    expect(() => credits.observe({ programId: "p", engineId: "A", at: 0, contextTokens: 1, cachedTokens: Number.NaN })).toThrow(/cachedTokens/);
    expect(credits.programCount).toBe(0);
    expect(() => new CacheCreditLedger({ ...DEFAULT_CACHE_CREDIT_SETTINGS, halfLifeMs: 0 })).toThrow(/halfLifeMs/);
  });
});
