/*
 * Options of `npm run bench:tao`. Defaults: the coding-agent and function-calling
 * built-ins, 4 engines, three Poisson arrival rates each from light to heavy:
 *   coding-agent      0.1, 0.3, 3 programs/s, 300 programs (at 3/s all of them run at
 *                     once, well past what 4 engines' KV holds: contexts of ~30k
 *                     tokens on average, up to 70k, against ~421k tokens per engine);
 *   function-calling  1, 3, 6 programs/s, 400 programs (contexts of a few thousand
 *                     tokens: KV never binds; load is the engines' compute).
 * `--quick` keeps the rates and runs far fewer programs (a smoke run, seconds).
 *
 * `--workload` / `--workloads` also take any other built-in or a workload JSON file, as
 * `npm run bench` does: without --rates such a workload runs at half, once and twice
 * its own Poisson rate, with its own program count (at most 200; 24 with --quick).
 */

import { parseArgs } from "node:util";
import { DEFAULT_HOLD_LEFT_OUT_MS } from "../../core/tao/settings.js";
import { type PolicyName, isPolicyName } from "../../sim/des/policies.js";
import type { Workload } from "../../sim/workload/schema.js";

/** The default workloads, with their own rates and sizes below. */
export const TAO_BENCH_WORKLOADS = ["coding-agent", "function-calling"] as const;
type DefaultWorkload = (typeof TAO_BENCH_WORKLOADS)[number];
/** A built-in workload name or a path to a workload file, as given. */
export type TaoBenchWorkload = string;

export const TAO_BENCH_POLICIES: readonly PolicyName[] = ["fcfs-rr", "fcfs-least-loaded", "cache-aware", "agentix", "agentix-tao"];

interface WorkloadDefaults {
  rates: number[];
  programs: number;
  quickPrograms: number;
}

export const TAO_BENCH_DEFAULTS: Readonly<Record<DefaultWorkload, WorkloadDefaults>> = {
  "coding-agent": { rates: [0.1, 0.3, 3], programs: 300, quickPrograms: 24 },
  "function-calling": { rates: [1, 3, 6], programs: 400, quickPrograms: 60 },
};

export interface TaoBenchOptions {
  quick: boolean;
  workloads: TaoBenchWorkload[];
  policies: PolicyName[];
  engines: number;
  seed: number;
  /** Per workload: programs per run (absent: from the workload file, resolveWorkloadRun). */
  programs: Record<TaoBenchWorkload, number>;
  /** Per workload: arrival rates (programs/s) (absent: from the workload file, resolveWorkloadRun). */
  rates: Record<TaoBenchWorkload, number[]>;
  /** TAO: least virtual time between plans (ms). */
  replanMs: number;
  /** TAO: longest a left-out program is held before it is routed anyway (ms); one agentix-tao run per value. */
  holdMs: number[];
  /** Directory of tao.json. */
  outDir: string;
}

export const TAO_BENCH_USAGE = `bench:tao [options]   TAO placement vs routers in the simulator

  --quick             a smoke run: the same rates, ${TAO_BENCH_DEFAULTS["coding-agent"].quickPrograms} coding agents / ${TAO_BENCH_DEFAULTS["function-calling"].quickPrograms} function-calling programs
  --workloads LIST    built-in names or workload JSON files (default ${TAO_BENCH_WORKLOADS.join(",")}); a workload
                      other than those two runs at ½, 1 and 2 × its own Poisson rate unless --rates is given
  --workload NAME|FILE  one workload (as npm run bench takes it)
  --policies LIST     default ${TAO_BENCH_POLICIES.join(",")}
  --engines N         engines (default 4)
  --programs N        programs per run, every workload (default ${TAO_BENCH_DEFAULTS["coding-agent"].programs} / ${TAO_BENCH_DEFAULTS["function-calling"].programs})
  --rates LIST        arrival rates in programs/s, every workload (default coding-agent ${TAO_BENCH_DEFAULTS["coding-agent"].rates.join(",")}; function-calling ${TAO_BENCH_DEFAULTS["function-calling"].rates.join(",")})
  --seed N            workload seed (default 1)
  --replan-ms N       TAO: least virtual time between two plans (default 0: whenever the inputs changed)
  --hold-ms LIST      TAO: longest a program the plan left out is held before it is routed, one agentix-tao run
                      per value (default ${DEFAULT_HOLD_LEFT_OUT_MS}; 0 routes at once; Infinity holds until promoted)
  --out DIR           where tao.json goes (default bench-results)
  -h, --help          this text`;

function list(flag: string, raw: string): string[] {
  const items = raw
    .split(",")
    .map((item) => item.trim())
    .filter((item) => item !== "");
  if (items.length === 0) throw new Error(`--${flag}: needs at least one value`);
  return items;
}

function number(flag: string, raw: string | undefined, check: (n: number) => boolean, what: string): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (raw.trim() === "" || !check(value)) throw new Error(`--${flag} must be ${what}, got "${raw}"`);
  return value;
}

const positiveInt = (n: number) => Number.isInteger(n) && n >= 1;

/** undefined for --help; throws an Error naming the flag for bad input. */
export function parseTaoBenchArgs(argv: readonly string[]): TaoBenchOptions | undefined {
  const { values } = parseArgs({
    args: [...argv],
    strict: true,
    allowPositionals: false,
    options: {
      quick: { type: "boolean", default: false },
      workloads: { type: "string" },
      workload: { type: "string" },
      policies: { type: "string" },
      engines: { type: "string" },
      programs: { type: "string" },
      rates: { type: "string" },
      seed: { type: "string" },
      "replan-ms": { type: "string" },
      "hold-ms": { type: "string" },
      out: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help === true) return undefined;
  const quick = values.quick === true;

  if (values.workload !== undefined && values.workloads !== undefined) throw new Error("--workload and --workloads exclude each other: give one");
  if (values.workload !== undefined && values.workload.trim() === "") throw new Error("--workload: needs a workload name or file");
  const workloads = [...new Set(values.workload !== undefined ? [values.workload.trim()] : values.workloads === undefined ? [...TAO_BENCH_WORKLOADS] : list("workloads", values.workloads))];
  const policies = values.policies === undefined ? [...TAO_BENCH_POLICIES] : list("policies", values.policies);
  for (const p of policies) if (!isPolicyName(p)) throw new Error(`--policies: unknown policy "${p}"`);

  const engines = number("engines", values.engines, positiveInt, "an integer >= 1") ?? 4;
  const seed = number("seed", values.seed, (n) => Number.isInteger(n) && n >= 0 && n < 2 ** 32, "an integer in [0, 2^32)") ?? 1;
  const programs = number("programs", values.programs, positiveInt, "an integer >= 1");
  const rates = values.rates === undefined ? undefined : list("rates", values.rates).map((r) => number("rates", r, (n) => Number.isFinite(n) && n > 0, "a list of numbers > 0") as number);
  const holdMs =
    values["hold-ms"] === undefined
      ? [DEFAULT_HOLD_LEFT_OUT_MS]
      : [...new Set(list("hold-ms", values["hold-ms"]).map((h) => number("hold-ms", h, (n) => n === Number.POSITIVE_INFINITY || (Number.isFinite(n) && n >= 0), "a list of numbers >= 0 or Infinity") as number))];
  const replanMs = number("replan-ms", values["replan-ms"], (n) => Number.isFinite(n) && n >= 0, "a number >= 0") ?? 0;
  const outDir = values.out ?? "bench-results";
  if (outDir.trim() === "") throw new Error("--out must not be empty");

  // The default workloads' own sizes and rates; any other workload's come from its file (resolveWorkloadRun).
  const perWorkload = <T>(pick: (d: WorkloadDefaults) => T, given: T | undefined): Record<TaoBenchWorkload, T> =>
    Object.fromEntries(
      workloads.flatMap((w) => {
        const defaults = isDefaultWorkload(w) ? TAO_BENCH_DEFAULTS[w] : undefined;
        const value = given ?? (defaults === undefined ? undefined : pick(defaults));
        return value === undefined ? [] : [[w, value]];
      }),
    );
  return {
    quick,
    // The default workloads first, in their order; others as given.
    workloads: [...TAO_BENCH_WORKLOADS.filter((w) => workloads.includes(w)), ...workloads.filter((w) => !isDefaultWorkload(w))],
    policies: [...new Set(policies)] as PolicyName[],
    engines,
    seed,
    programs: perWorkload((d) => (quick ? d.quickPrograms : d.programs), programs),
    rates: perWorkload((d) => d.rates, rates),
    replanMs,
    holdMs,
    outDir,
  };
}

function isDefaultWorkload(name: string): name is DefaultWorkload {
  return (TAO_BENCH_WORKLOADS as readonly string[]).includes(name);
}

/** Programs per run for a workload without defaults here: its own count, capped. */
export const OTHER_WORKLOAD_PROGRAMS = { programs: 200, quickPrograms: 24 } as const;

/**
 * Programs and rates for one workload: the options' (flags or the default
 * workloads' own), else from the workload file: its count (capped) and ½, 1 and 2 ×
 * its Poisson rate. Throws for a batch workload without --rates.
 */
export function resolveWorkloadRun(options: Pick<TaoBenchOptions, "programs" | "rates" | "quick">, name: TaoBenchWorkload, workload: Workload): { programs: number; rates: number[] } {
  const cap = options.quick ? OTHER_WORKLOAD_PROGRAMS.quickPrograms : OTHER_WORKLOAD_PROGRAMS.programs;
  const programs = options.programs[name] ?? Math.min(cap, workload.programs.count ?? cap);
  let rates = options.rates[name];
  if (rates === undefined) {
    if (workload.arrival.process !== "poisson") throw new Error(`workload ${name} has batch arrivals: give --rates`);
    const r = workload.arrival.ratePerSec;
    rates = [r / 2, r, r * 2].map((x) => Number(x.toPrecision(3)));
  }
  return { programs, rates };
}
