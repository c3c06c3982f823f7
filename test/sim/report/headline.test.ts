import { describe, expect, it } from "vitest";
import { defaultSlo, type RatePoint, sustainedRate, sustainedRatio } from "../../../src/sim/report/headline.js";

const pt = (ratePerSec: number, meanMsPerToken: number | null, stable = true): RatePoint => ({ ratePerSec, meanMsPerToken, stable });

describe("sustainedRate", () => {
  it("interpolates the SLO crossing in log–log space", () => {
    // Between (2, 12) and (4, 30), SLO 20: 2^(1 + ln(20/12) / ln(30/12)) ≈ 2.9435.
    const s = sustainedRate([pt(8, 100), pt(1, 10), pt(4, 30), pt(2, 12)], 20);
    expect(s.relation).toBe("=");
    expect(s.ratePerSec).toBeCloseTo(2 ** (1 + Math.log(20 / 12) / Math.log(30 / 12)), 10);
    expect(s.ratePerSec).toBeCloseTo(2.9435, 3);
  });

  it("uses the first crossing even if a higher rate meets the SLO again", () => {
    expect(sustainedRate([pt(1, 10), pt(2, 40), pt(4, 15)], 20).ratePerSec).toBeLessThan(2);
  });

  it("a lower bound when every rate meets the SLO", () => {
    expect(sustainedRate([pt(1, 10), pt(2, 11)], 20)).toEqual({ ratePerSec: 2, relation: ">=" });
  });

  it("an upper bound when even the lowest rate misses", () => {
    expect(sustainedRate([pt(1, 25), pt(2, 30)], 20)).toEqual({ ratePerSec: 1, relation: "<" });
  });

  it("an unstable rate misses however low its mean, and is not interpolated through", () => {
    expect(sustainedRate([pt(1, 10), pt(2, 5, false), pt(4, 12)], 20)).toEqual({ ratePerSec: 1, relation: "=" });
    expect(sustainedRate([pt(1, 10), pt(2, null)], 20)).toEqual({ ratePerSec: 1, relation: "=" });
    // Stable but over the SLO: interpolated; unstable and over: the last rate met.
    expect(sustainedRate([pt(1, 10), pt(2, 40)], 20).ratePerSec).toBeGreaterThan(1);
    expect(sustainedRate([pt(1, 10), pt(2, 40, false)], 20).ratePerSec).toBe(1);
  });

  it("a policy whose mean stays under the SLO only because the run never reached steady state does not sustain it", () => {
    expect(sustainedRate([pt(1, 10, false), pt(2, 11, false)], 20)).toEqual({ ratePerSec: 1, relation: "<" });
  });

  it("a point exactly at the SLO meets it", () => {
    expect(sustainedRate([pt(1, 10), pt(2, 20)], 20)).toEqual({ ratePerSec: 2, relation: ">=" });
  });

  it("needs a rate", () => {
    expect(() => sustainedRate([], 20)).toThrow(RangeError);
  });
});

describe("sustainedRatio", () => {
  const exact = (r: number) => ({ ratePerSec: r, relation: "=" as const });
  it("exact over exact", () => {
    expect(sustainedRatio(exact(3), exact(2))).toEqual({ value: 1.5, relation: "=" });
  });
  it("bounds propagate", () => {
    expect(sustainedRatio({ ratePerSec: 4, relation: ">=" }, exact(2))).toEqual({ value: 2, relation: ">=" });
    expect(sustainedRatio(exact(3), { ratePerSec: 4, relation: ">=" })).toEqual({ value: 0.75, relation: "<=" });
    expect(sustainedRatio({ ratePerSec: 1, relation: "<" }, exact(2))).toEqual({ value: 0.5, relation: "<" });
    expect(sustainedRatio(exact(3), { ratePerSec: 1, relation: "<" })).toEqual({ value: 3, relation: ">" });
  });
  it("unknown when both are bounds the same way", () => {
    expect(sustainedRatio({ ratePerSec: 4, relation: ">=" }, { ratePerSec: 4, relation: ">=" })).toBeNull();
    expect(sustainedRatio({ ratePerSec: 1, relation: "<" }, { ratePerSec: 1, relation: "<" })).toBeNull();
  });
});

describe("defaultSlo", () => {
  it("5× the baseline's mean at its lowest rate", () => {
    expect(defaultSlo([pt(4, 100), pt(0.5, 12), pt(1, 13)])).toBe(60);
    expect(defaultSlo([pt(1, 10)], 3)).toBe(30);
  });
  it("fails clearly when the baseline finished nothing there", () => {
    expect(() => defaultSlo([pt(1, null, false)])).toThrow(/--slo-ms-per-token/);
  });
});
