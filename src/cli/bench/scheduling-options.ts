import { parseArgs } from "node:util";
import { z } from "zod";
import { SERVICE_MEASURES, type ServiceMeasure } from "../../core/dispatch.js";
import { ALL_POLICY_NAMES, POLICY_NAMES, type PolicyName, POOL_DEFAULT_MAX_IN_FLIGHT } from "../../sim/des/policies.js";
import { DEFAULT_SLO_FACTOR } from "../../sim/report/headline.js";
import { DEFAULT_WINDOW_SPEC } from "../../sim/report/steady-state.js";
import { DEFAULT_PROFILE, ENGINE_PROFILES, type EngineProfileName } from "../../sim/profiles.js";
import { isRegimeName, REGIME_NAMES, REGIMES, type RegimeName } from "./scheduling-regimes.js";

/*
 * Flags of `agentix bench` / `npm run bench`: read as strings by node:util's
 * parseArgs, then validated and converted by one zod schema, so every bad value is
 * reported with its flag.
 */

export interface SchedulingBenchOptions {
  /** --regime: a complete setting with goals (scheduling-regimes.ts); the other flags override its fields. */
  regime: RegimeName | undefined;
  /** The flags that overrode the regime's settings (said in the report). */
  regimeOverrides: string[];
  /** The rates are the regime's grid (not --rates). */
  ratesFromRegime: boolean;
  /** A built-in workload name or a path to a workload JSON file. */
  workload: string;
  policies: PolicyName[];
  /** Arrival rates (programs/s), ascending; undefined derives a ladder from a capacity estimate. */
  rates: number[] | undefined;
  /** Programs generated for every run; undefined: the workload's count, at most the default size. */
  programs: number | undefined;
  engines: number;
  engineProfile: EngineProfileName;
  /** Overrides the workload's seed. */
  seed: number | undefined;
  /** undefined: sloFactor × the baseline's mean at the lowest rate. */
  sloMsPerToken: number | undefined;
  sloFactor: number;
  outDir: string;
  /** Pool buffer per engine for the queueing policies; undefined: the pool's default. */
  maxInFlightPerEngine: number | undefined;
  /** Admission's step-time target (× the decode floor) for the queueing policies; undefined: the core's (none). */
  stepTargetFactor: number | undefined;
  /** What a call's service counts; undefined: the core's default ("work"). */
  service: ServiceMeasure | undefined;
  /** Factor on the workload's tool / think gaps. */
  gapScale: number;
  /** Cap on simulated time per batch run (--batch). */
  maxSimMs: number;
  /** Share of each run's programs (first by arrival) that only warm up. */
  warmupFraction: number;
  /** Share (last by arrival) that only keeps the load on while the measured ones finish. */
  cooldownFraction: number;
  /** A run may go on this many window lengths after its window (at least; see BenchConfig.drain). */
  drainWindows: number;
  /** Also run every policy as an offline batch (all programs at t = 0) for the makespan. */
  batch: boolean;
  /** Worker threads for the steady-state runs (1: this thread). */
  jobs: number;
  quick: boolean;
}

export const DEFAULTS = {
  workload: "mixed",
  programs: 200,
  quickPrograms: 40,
  engines: 4,
  outDir: "bench-results",
  maxSimHours: 48,
  drainWindows: 1,
} as const;

export const SCHEDULING_BENCH_USAGE = `agentix bench [options]   compare scheduling policies on the discrete-event simulator

Runs every policy on the same generated programs at a grid of Poisson arrival rates,
measured at steady state (warm-up and drain excluded; a rate counts as sustained only
if the backlog and latency do not grow across the measurement window), then prints the
tables (throughput at equal mean normalised latency, the latency curve, whether
ordering was engaged, results per program kind and per tenant, goals) and writes a
JSON file and an HTML report.

  --regime NAME             ${REGIME_NAMES.join(" | ")}: issue 10's settings with their
                            goals (compute: the mixed workload, compute-bound; kv: long-context
                            coding agents, KV-bound; autellix: one A100, Autellix's kinds;
                            churn and starvation: the queue made to hold, to judge tenant
                            fairness and anti-starvation); the flags below override the
                            regime's settings
  --workload NAME|FILE      built-in (chat, function-calling, tree-search, coding-agent,
                            mixed, long-context-coding, autellix) or a workload JSON file
                            (default mixed)
  --policies LIST           comma-separated, from ${ALL_POLICY_NAMES.join(", ")}
                            (default ${POLICY_NAMES.join(",")}; fcfs-rr is the baseline when present)
  --rates LIST              arrival rates in programs/s, e.g. 0.5,1,2 (default: the regime's
                            grid, else a ladder around a steady-state capacity estimate,
                            extended upward until the SLO is missed)
  --programs N              programs per run (default: the workload's count, at most
                            ${DEFAULTS.programs}, or ${DEFAULTS.quickPrograms} with --quick)
  --engines N               simulated engines (default ${DEFAULTS.engines})
  --engine-profile NAME     ${Object.keys(ENGINE_PROFILES).join(" | ")} (default ${DEFAULT_PROFILE})
  --seed N                  workload seed (default: the workload's own)
  --slo-ms-per-token X      SLO on mean normalised latency, in ms per generated token
  --slo-factor X            else the SLO is X × the baseline's mean at the lowest rate
                            (default ${DEFAULT_SLO_FACTOR})
  --max-in-flight N         pool buffer per engine for the queueing policies (default: the
                            pool's own default, ${POOL_DEFAULT_MAX_IN_FLIGHT})
  --step-target-factor X    admission holds a call while the engine's projected decode step
                            would pass X × the profile's decode floor (default: no step limit)
  --service work|wall       what a call's service counts for program priority and tenant shares:
                            its standalone engine time from usage (work, the pool's default) or
                            dispatch to finish (wall)
  --gap-scale X             multiply every tool / think gap (default 1; 0 = no tool time,
                            Autellix's stress setting)
  --warmup X                share of programs that only warm up (default ${DEFAULT_WINDOW_SPEC.warmupFraction})
  --cooldown X              share that only keeps the load on at the end (default ${DEFAULT_WINDOW_SPEC.cooldownFraction})
  --drain-windows X         a run may go on X window lengths past its window (default ${DEFAULTS.drainWindows})
  --batch                   also run every policy as an offline batch (makespan)
  --jobs N                  run the simulations in N worker threads (default 1; the figures
                            are the same, only the wall time changes)
  --max-sim-hours X         simulated-time cap per batch run (default ${DEFAULTS.maxSimHours})
  --out DIR                 where the JSON and HTML files go (default ${DEFAULTS.outDir}/)
  --quick                   small, fast run for a demo or a test
  -h, --help                this text`;

/** A bad flag value; its message names the flag. */
export class BenchUsageError extends Error {
  override name = "BenchUsageError";
}

const positiveNumber = z
  .string()
  .trim()
  .min(1, "needs a value")
  .transform(Number)
  .refine((n) => Number.isFinite(n) && n > 0, "must be a positive number");

const positiveInt = (max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .refine((n) => n >= 1 && n <= max, `must be between 1 and ${max}`);

const share = z
  .string()
  .trim()
  .min(1, "needs a value")
  .transform(Number)
  .refine((n) => Number.isFinite(n) && n >= 0 && n < 0.5, "must be a number in [0, 0.5)");

const FlagValues = z.strictObject({
  regime: z
    .string()
    .refine(isRegimeName, `must be one of ${REGIME_NAMES.join(", ")}`)
    .transform((name) => name as RegimeName)
    .optional(),
  workload: z.string().trim().min(1, "needs a workload name or file").optional(),
  policies: z
    .string()
    .transform((raw) => raw.split(",").map((item) => item.trim()).filter(Boolean))
    .superRefine((items, ctx) => {
      if (items.length === 0) ctx.addIssue({ code: "custom", message: "needs at least one policy" });
      for (const item of items) {
        if (!(ALL_POLICY_NAMES as readonly string[]).includes(item)) {
          ctx.addIssue({ code: "custom", message: `unknown policy "${item}" (known: ${ALL_POLICY_NAMES.join(", ")})` });
        }
      }
    })
    // Canonical order without duplicates: table rows and legends follow it.
    .transform((items) => ALL_POLICY_NAMES.filter((name) => items.includes(name)))
    .optional(),
  rates: z
    .string()
    .transform((raw, ctx) => {
      const items = raw.split(",").map((item) => item.trim()).filter(Boolean);
      if (items.length === 0) ctx.addIssue({ code: "custom", message: "needs at least one rate" });
      const rates = items.map(Number);
      for (const [i, rate] of rates.entries()) {
        if (!Number.isFinite(rate) || rate <= 0) ctx.addIssue({ code: "custom", message: `"${items[i]}" is not a positive number of programs/s` });
      }
      return [...new Set(rates)].sort((a, b) => a - b);
    })
    .optional(),
  programs: positiveInt(100_000).optional(),
  engines: positiveInt(256).optional(),
  "engine-profile": z
    .string()
    .refine((name) => Object.hasOwn(ENGINE_PROFILES, name), `must be one of ${Object.keys(ENGINE_PROFILES).join(", ")}`)
    .transform((name) => name as EngineProfileName)
    .optional(),
  seed: z
    .string()
    .trim()
    .regex(/^\d+$/, "must be a whole number")
    .transform(Number)
    .refine((n) => n <= 2 ** 32 - 1, "must be below 2^32")
    .optional(),
  "slo-ms-per-token": positiveNumber.optional(),
  "slo-factor": positiveNumber.refine((n) => n > 1, "must be > 1 (a multiple of the unloaded latency)").optional(),
  "max-sim-hours": positiveNumber.optional(),
  "max-in-flight": positiveInt(10_000).optional(),
  "step-target-factor": positiveNumber.refine((n) => n >= 1, "must be >= 1 (a multiple of the decode floor)").optional(),
  service: z.enum(SERVICE_MEASURES, { error: `must be one of ${SERVICE_MEASURES.join(", ")}` }).optional(),
  "gap-scale": z
    .string()
    .trim()
    .min(1, "needs a value")
    .transform(Number)
    .refine((n) => Number.isFinite(n) && n >= 0, "must be a number ≥ 0")
    .optional(),
  warmup: share.optional(),
  cooldown: share.optional(),
  "drain-windows": positiveNumber.optional(),
  batch: z.boolean().default(false),
  jobs: positiveInt(64).optional(),
  out: z.string().trim().min(1, "needs a directory").default(DEFAULTS.outDir),
  quick: z.boolean().default(false),
  help: z.boolean().default(false),
});

function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const flag = issue.path.length > 0 ? `--${issue.path.map(String).join(".")}` : "flags";
      return `${flag}: ${issue.message}`;
    })
    .join("\n");
}

/** Parses and validates the flags. Returns undefined for --help; throws BenchUsageError otherwise. */
export function parseSchedulingBenchArgs(argv: string[]): SchedulingBenchOptions | undefined {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        regime: { type: "string" },
        workload: { type: "string" },
        policies: { type: "string" },
        rates: { type: "string" },
        programs: { type: "string" },
        engines: { type: "string" },
        "engine-profile": { type: "string" },
        seed: { type: "string" },
        "slo-ms-per-token": { type: "string" },
        "slo-factor": { type: "string" },
        "max-sim-hours": { type: "string" },
        "max-in-flight": { type: "string" },
        "step-target-factor": { type: "string" },
        service: { type: "string" },
        "gap-scale": { type: "string" },
        warmup: { type: "string" },
        cooldown: { type: "string" },
        "drain-windows": { type: "string" },
        batch: { type: "boolean" },
        jobs: { type: "string" },
        out: { type: "string" },
        quick: { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new BenchUsageError(`${error instanceof Error ? error.message : String(error)}\n\n${SCHEDULING_BENCH_USAGE}`);
  }
  const defined = Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined));
  const parsed = FlagValues.safeParse(defined);
  if (!parsed.success) throw new BenchUsageError(describeIssues(parsed.error));
  const v = parsed.data;
  if (v.help) return undefined;
  if (v["slo-ms-per-token"] !== undefined && v["slo-factor"] !== undefined) {
    throw new BenchUsageError("--slo-ms-per-token and --slo-factor exclude each other: give one");
  }
  const regime = v.regime === undefined ? undefined : REGIMES[v.regime];
  const overrides = regime === undefined ? [] : (["workload", "policies", "rates", "programs", "engines", "engine-profile", "gap-scale", "slo-factor", "slo-ms-per-token", "step-target-factor"] as const).filter((flag) => v[flag] !== undefined).map((flag) => `--${flag}`);
  if (v.warmup !== undefined && v.cooldown !== undefined && v.warmup + v.cooldown >= 0.9) {
    throw new BenchUsageError("--warmup and --cooldown must leave at least 10 % of the programs to measure");
  }
  return {
    regime: v.regime,
    regimeOverrides: overrides,
    ratesFromRegime: regime !== undefined && v.rates === undefined,
    workload: v.workload ?? regime?.workload ?? DEFAULTS.workload,
    policies: v.policies ?? (regime === undefined ? [...POLICY_NAMES] : [...regime.policies]),
    rates: v.rates ?? (regime === undefined ? undefined : [...regime.rates]),
    programs: v.programs ?? regime?.programs,
    engines: v.engines ?? regime?.engines ?? DEFAULTS.engines,
    engineProfile: v["engine-profile"] ?? regime?.engineProfile ?? DEFAULT_PROFILE,
    seed: v.seed,
    sloMsPerToken: v["slo-ms-per-token"],
    sloFactor: v["slo-factor"] ?? regime?.sloFactor ?? DEFAULT_SLO_FACTOR,
    outDir: v.out,
    maxInFlightPerEngine: v["max-in-flight"],
    stepTargetFactor: v["step-target-factor"] ?? regime?.stepTargetFactor,
    service: v.service,
    gapScale: v["gap-scale"] ?? regime?.gapScale ?? 1,
    maxSimMs: (v["max-sim-hours"] ?? DEFAULTS.maxSimHours) * 3_600_000,
    warmupFraction: v.warmup ?? DEFAULT_WINDOW_SPEC.warmupFraction,
    cooldownFraction: v.cooldown ?? DEFAULT_WINDOW_SPEC.cooldownFraction,
    drainWindows: v["drain-windows"] ?? DEFAULTS.drainWindows,
    batch: v.batch,
    jobs: v.jobs ?? 1,
    quick: v.quick,
  };
}
