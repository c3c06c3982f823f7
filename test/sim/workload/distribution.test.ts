import { describe, expect, it } from "vitest";
import { compileDistribution, Distribution, lognormalParameters, Rng } from "../../../src/sim/workload/index.js";

function draw(spec: unknown, n = 100_000, seed = 7): number[] {
  const sample = compileDistribution(Distribution.parse(spec));
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => sample(rng));
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

describe("Rng", () => {
  it("repeats for a seed, differs across seeds, and is uniform", () => {
    const a = new Rng(42);
    const b = new Rng(42);
    const c = new Rng(43);
    const xs = Array.from({ length: 50_000 }, () => a.next());
    expect(Array.from({ length: 50_000 }, () => b.next())).toEqual(xs);
    expect(c.next()).not.toBe(xs[0]);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(mean(xs)).toBeCloseTo(0.5, 2);
    const buckets = new Array<number>(10).fill(0);
    for (const x of xs) buckets[Math.floor(x * 10)] = (buckets[Math.floor(x * 10)] ?? 0) + 1;
    // ±5 standard deviations of a binomial(50000, 0.1) bucket.
    expect(buckets.every((n) => Math.abs(n - 5_000) < 5 * Math.sqrt(4_500))).toBe(true);
  });
});

describe("distributions", () => {
  it("treats a bare number as a constant", () => {
    expect(Distribution.parse(3)).toEqual({ dist: "constant", value: 3 });
    expect(draw(3, 10)).toEqual(new Array(10).fill(3));
  });

  it("hits a lognormal's median and mean in every parameterisation", () => {
    const byMean = draw({ dist: "lognormal", median: 1.3, mean: 1.9 });
    expect(median(byMean)).toBeCloseTo(1.3, 1);
    expect(mean(byMean) / 1.9).toBeCloseTo(1, 1);
    const { mu, sigma } = lognormalParameters({ dist: "lognormal", median: 1.3, mean: 1.9 });
    expect(median(draw({ dist: "lognormal", mu, sigma }))).toBeCloseTo(1.3, 1);
    expect(median(draw({ dist: "lognormal", median: 0.3, sigma: 2.86 }))).toBeCloseTo(0.3, 1);
  });

  it("samples exponential, normal, uniform and discrete with the right moments", () => {
    expect(mean(draw({ dist: "exponential", mean: 0.5 }))).toBeCloseTo(0.5, 2);
    const normal = draw({ dist: "normal", mean: 5_000, sd: 1_000 });
    expect(mean(normal) / 5_000).toBeCloseTo(1, 2);
    const ints = draw({ dist: "uniform", min: 1, max: 6, integer: true });
    expect(new Set(ints)).toEqual(new Set([1, 2, 3, 4, 5, 6]));
    const discrete = draw({ dist: "discrete", values: [1, 2, 4], weights: [0.5, 0.25, 0.25] });
    expect(mean(discrete)).toBeCloseTo(2, 1);
    expect(new Set(draw({ dist: "empirical", values: [3, 9] }, 1_000))).toEqual(new Set([3, 9]));
    expect(new Set(draw({ dist: "discrete", values: [1, 2], weights: [0, 1] }, 1_000))).toEqual(new Set([2]));
  });

  it("truncates by redrawing or by clamping, and rounds when asked", () => {
    const redrawn = draw({ dist: "exponential", mean: 10, max: 5 });
    expect(Math.max(...redrawn)).toBeLessThanOrEqual(5);
    expect(redrawn.filter((x) => x === 5).length).toBe(0);
    const clamped = draw({ dist: "exponential", mean: 10, max: 5, truncate: "clamp" });
    // P(X > 5) = e^-0.5 ≈ 0.61 of the draws pile on the bound.
    expect(clamped.filter((x) => x === 5).length / clamped.length).toBeCloseTo(Math.exp(-0.5), 1);
    const rounded = draw({ dist: "normal", mean: 10, sd: 3, min: 1, integer: true });
    expect(rounded.every((x) => Number.isInteger(x) && x >= 1)).toBe(true);
    // A bound deep in the tail still returns (clamped after bounded redraws).
    expect(draw({ dist: "normal", mean: 0, sd: 1, min: 100 }, 10).every((x) => x === 100)).toBe(true);
  });
});
