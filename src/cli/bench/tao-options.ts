/*
 * Options of `npm run bench:tao`. Defaults: the coding-agent and function-calling
 * built-ins, 4 engines, three Poisson arrival rates each from light to heavy:
 *   coding-agent      0.1, 0.3, 3 programs/s, 300 programs (at 3/s all of them run at
 *                     once, well past what 4 engines' KV holds: contexts of ~30k
 *                     tokens on average, up to 70k, against ~421k tokens per engine);
 *   function-calling  1, 3, 6 programs/s, 400 programs (contexts of a few thousand
 *                     tokens: KV never binds; load is the engines' compute).
 * `--quick` keeps the rates and runs far fewer programs (a smoke run, seconds).
 */

import { parseArgs } from "node:util";
import { DEFAULT_HOLD_LEFT_OUT_MS } from "../../core/tao/settings.js";
import { type PolicyName, isPolicyName } from "../../sim/des/policies.js";

export const TAO_BENCH_WORKLOADS = ["coding-agent", "function-calling"] as const;
export type TaoBenchWorkload = (typeof TAO_BENCH_WORKLOADS)[number];

export const TAO_BENCH_POLICIES: readonly PolicyName[] = ["fcfs-rr", "fcfs-least-loaded", "cache-aware", "agentix", "agentix-tao"];

interface WorkloadDefaults {
  rates: number[];
  programs: number;
  quickPrograms: number;
}

export const TAO_BENCH_DEFAULTS: Readonly<Record<TaoBenchWorkload, WorkloadDefaults>> = {
  "coding-agent": { rates: [0.1, 0.3, 3], programs: 300, quickPrograms: 24 },
  "function-calling": { rates: [1, 3, 6], programs: 400, quickPrograms: 60 },
};

export interface TaoBenchOptions {
  quick: boolean;
  workloads: TaoBenchWorkload[];
  policies: PolicyName[];
  engines: number;
  seed: number;
  /** Per workload: programs per run. */
  programs: Record<TaoBenchWorkload, number>;
  /** Per workload: arrival rates (programs/s). */
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
  --workloads LIST    from ${TAO_BENCH_WORKLOADS.join(", ")} (default both)
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

  const workloads = values.workloads === undefined ? [...TAO_BENCH_WORKLOADS] : list("workloads", values.workloads);
  for (const w of workloads) {
    if (!(TAO_BENCH_WORKLOADS as readonly string[]).includes(w)) throw new Error(`--workloads: unknown workload "${w}" (known: ${TAO_BENCH_WORKLOADS.join(", ")})`);
  }
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

  const perWorkload = <T>(pick: (w: TaoBenchWorkload, d: WorkloadDefaults) => T): Record<TaoBenchWorkload, T> => ({
    "coding-agent": pick("coding-agent", TAO_BENCH_DEFAULTS["coding-agent"]),
    "function-calling": pick("function-calling", TAO_BENCH_DEFAULTS["function-calling"]),
  });
  return {
    quick,
    workloads: TAO_BENCH_WORKLOADS.filter((w) => workloads.includes(w)),
    policies: [...new Set(policies)] as PolicyName[],
    engines,
    seed,
    programs: perWorkload((_, d) => programs ?? (quick ? d.quickPrograms : d.programs)),
    rates: perWorkload((_, d) => rates ?? d.rates),
    replanMs,
    holdMs,
    outDir,
  };
}
