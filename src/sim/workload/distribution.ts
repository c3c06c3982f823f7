import { z } from "zod";
import type { Rng } from "./prng.js";

/*
 * Workload knobs are distributions, written in JSON:
 *
 *   3                                              a constant (shorthand)
 *   { "dist": "constant", "value": 3 }
 *   { "dist": "uniform", "min": 1, "max": 10 }
 *   { "dist": "exponential", "mean": 0.5 }
 *   { "dist": "lognormal", "median": 1.3, "mean": 1.9 }   or { "mu", "sigma" } or { "median", "sigma" }
 *   { "dist": "normal", "mean": 5000, "sd": 1000 }
 *   { "dist": "discrete", "values": [1, 2, 3], "weights": [0.8, 0.15, 0.05] }   ("empirical": same; weights default equal)
 *
 * exponential, lognormal and normal also take `min`/`max` bounds (by default a
 * draw outside them is redrawn, so the shape inside is kept; `"truncate": "clamp"`
 * piles the excess on the bound instead, e.g. a search that stops at 50
 * iterations) and `integer: true` (round to the nearest integer, before the bounds
 * are checked). Token and count knobs are always rounded by the generator.
 */

/** Redraws before a resampled bound gives up and clamps (bounds far in the tail). */
const MAX_REDRAWS = 100;

const finite = z.number().refine(Number.isFinite, "must be a finite number");
const positive = finite.refine((v) => v > 0, "must be > 0");

const Bounds = {
  min: finite.optional(),
  max: finite.optional(),
  integer: z.boolean().optional(),
  truncate: z.enum(["resample", "clamp"]).optional(),
};

interface BoundsShape {
  min?: number | undefined;
  max?: number | undefined;
}

function checkBounds(value: BoundsShape, ctx: z.RefinementCtx): void {
  if (value.min !== undefined && value.max !== undefined && value.min > value.max) {
    ctx.addIssue({ code: "custom", path: ["max"], message: `must be ≥ min (${value.min})` });
  }
}

const Constant = z.strictObject({ dist: z.literal("constant"), value: finite });

const Uniform = z
  .strictObject({ dist: z.literal("uniform"), min: finite, max: finite, integer: z.boolean().optional() })
  .superRefine(checkBounds);

const Exponential = z.strictObject({ dist: z.literal("exponential"), mean: positive, ...Bounds }).superRefine(checkBounds);

const Lognormal = z
  .strictObject({
    dist: z.literal("lognormal"),
    median: positive.optional(),
    mean: positive.optional(),
    mu: finite.optional(),
    sigma: finite.refine((v) => v >= 0, "must be ≥ 0").optional(),
    ...Bounds,
  })
  .superRefine((value, ctx) => {
    checkBounds(value, ctx);
    const { median, mean, mu, sigma } = value;
    const forms = [
      median !== undefined && mean !== undefined,
      mu !== undefined && sigma !== undefined,
      median !== undefined && sigma !== undefined,
    ].filter(Boolean).length;
    if (forms !== 1 || (mu !== undefined && median !== undefined) || (mean !== undefined && sigma !== undefined)) {
      ctx.addIssue({
        code: "custom",
        path: [],
        message: "lognormal takes exactly one of {median, mean}, {mu, sigma} or {median, sigma}",
      });
      return;
    }
    if (median !== undefined && mean !== undefined && mean < median) {
      ctx.addIssue({ code: "custom", path: ["mean"], message: `must be ≥ median (${median}): a lognormal's mean exceeds its median` });
    }
  });

const Normal = z.strictObject({ dist: z.literal("normal"), mean: finite, sd: finite.refine((v) => v >= 0, "must be ≥ 0"), ...Bounds }).superRefine(checkBounds);

const discreteShape = {
  values: z.array(finite).min(1, "needs at least one value"),
  weights: z.array(finite.refine((v) => v >= 0, "must be ≥ 0")).optional(),
};

function checkWeights(value: { values: number[]; weights?: number[] | undefined }, ctx: z.RefinementCtx): void {
  const { values, weights } = value;
  if (weights === undefined) return;
  if (weights.length !== values.length) {
    ctx.addIssue({ code: "custom", path: ["weights"], message: `needs one weight per value (${values.length}), got ${weights.length}` });
  } else if (!weights.some((w) => w > 0)) {
    ctx.addIssue({ code: "custom", path: ["weights"], message: "at least one weight must be > 0" });
  }
}

const Discrete = z.strictObject({ dist: z.literal("discrete"), ...discreteShape }).superRefine(checkWeights);
const Empirical = z.strictObject({ dist: z.literal("empirical"), ...discreteShape }).superRefine(checkWeights);

const DistributionObject = z.discriminatedUnion("dist", [Constant, Uniform, Exponential, Lognormal, Normal, Discrete, Empirical], {
  error: (issue) =>
    typeof issue.input !== "object" || issue.input === null
      ? "expected a number or a distribution such as { \"dist\": \"lognormal\", \"median\": 1.3, \"mean\": 1.9 }"
      : undefined,
});

/** A distribution as written in a workload file (a bare number is a constant). */
export const Distribution = z.preprocess(
  (input) => (typeof input === "number" ? { dist: "constant", value: input } : input),
  DistributionObject,
);
export type Distribution = z.output<typeof DistributionObject>;

/**
 * A distribution for a knob whose values must be ≥ `lower` (tokens ≥ 1, gaps ≥ 0).
 * Only forms that can break the floor are rejected; the generator still clamps.
 */
export function knob(lower: number) {
  const floor = (path: string) => ({ code: "custom" as const, path: [path], message: `must be ≥ ${lower}` });
  return Distribution.superRefine((d, ctx) => {
    switch (d.dist) {
      case "constant":
        if (d.value < lower) ctx.addIssue(floor("value"));
        break;
      case "uniform":
        if (d.min < lower) ctx.addIssue(floor("min"));
        break;
      case "discrete":
      case "empirical":
        d.values.forEach((v, i) => {
          if (v < lower) ctx.addIssue({ code: "custom", path: ["values", i], message: `must be ≥ ${lower}` });
        });
        break;
      case "normal":
        if (d.min === undefined || d.min < lower) {
          ctx.addIssue({ code: "custom", path: ["min"], message: `a normal can fall below ${lower}: set min ≥ ${lower}` });
        }
        break;
      default:
        if (d.max !== undefined && d.max < lower) ctx.addIssue(floor("max"));
    }
  });
}

export type Sampler = (rng: Rng) => number;

/** Lognormal parameters (mu, sigma) of any accepted form. */
export function lognormalParameters(d: Extract<Distribution, { dist: "lognormal" }>): { mu: number; sigma: number } {
  if (d.mu !== undefined && d.sigma !== undefined) return { mu: d.mu, sigma: d.sigma };
  const median = d.median ?? 1;
  const mu = Math.log(median);
  if (d.sigma !== undefined) return { mu, sigma: d.sigma };
  // mean = median · e^{σ²/2}
  return { mu, sigma: Math.sqrt(2 * Math.log((d.mean ?? median) / median)) };
}

function standardNormal(rng: Rng): number {
  // Box–Muller; the second variate is dropped to keep the sampler stateless.
  return Math.sqrt(-2 * Math.log(rng.nextOpen())) * Math.cos(2 * Math.PI * rng.next());
}

function bounded(draw: Sampler, d: BoundsShape & { integer?: boolean | undefined; truncate?: string | undefined }): Sampler {
  const round = d.integer === true;
  const min = d.min ?? -Infinity;
  const max = d.max ?? Infinity;
  const once: Sampler = round ? (rng) => Math.round(draw(rng)) : draw;
  if (min === -Infinity && max === Infinity) return once;
  const clamp = (x: number) => Math.min(max, Math.max(min, x));
  if (d.truncate === "clamp") return (rng) => clamp(once(rng));
  return (rng) => {
    for (let i = 0; i < MAX_REDRAWS; i++) {
      const x = once(rng);
      if (x >= min && x <= max) return x;
    }
    return clamp(once(rng));
  };
}

/** Turns a parsed distribution into a fast sampler. */
export function compileDistribution(d: Distribution): Sampler {
  switch (d.dist) {
    case "constant": {
      const { value } = d;
      return () => value;
    }
    case "uniform": {
      const { min, max } = d;
      if (d.integer === true) {
        const lo = Math.ceil(min);
        const span = Math.floor(max) - lo + 1;
        return span > 0 ? (rng) => lo + rng.int(span) : () => Math.round(min);
      }
      return (rng) => min + (max - min) * rng.next();
    }
    case "exponential": {
      const { mean } = d;
      return bounded((rng) => -mean * Math.log(rng.nextOpen()), d);
    }
    case "lognormal": {
      const { mu, sigma } = lognormalParameters(d);
      return bounded((rng) => Math.exp(mu + sigma * standardNormal(rng)), d);
    }
    case "normal": {
      const { mean, sd } = d;
      return bounded((rng) => mean + sd * standardNormal(rng), d);
    }
    case "discrete":
    case "empirical": {
      const { values } = d;
      const weights = d.weights ?? values.map(() => 1);
      const cumulative: number[] = [];
      let total = 0;
      for (const w of weights) cumulative.push((total += w));
      return (rng) => {
        const u = rng.next() * total;
        for (let i = 0; i < cumulative.length; i++) if (u < (cumulative[i] as number)) return values[i] as number;
        return values[values.length - 1] as number;
      };
    }
  }
}
