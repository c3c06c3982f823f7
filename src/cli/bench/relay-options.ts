import path from "node:path";
import { parseArgs } from "node:util";
import { listOf, positiveInt, positiveNumber } from "./flag-values.js";
import { sourceTreeOf } from "./source-tree.js";

/*
 * Flags of `npm run bench:relay`. Defaults keep a run (5 levels × 2 targets, ~5 s
 * each, plus start-up and a warm-up per target) near a minute and a half.
 */

export const RELAY_TARGETS = ["engine", "pool"] as const;
/** The targets, and a second pool core built from another tree (--baseline-pool), measured in the same levels. */
export type RelayTargetName = (typeof RELAY_TARGETS)[number] | "pool-baseline";

export interface RelayBenchOptions {
  targets: RelayTargetName[];
  /** Concurrent streams per level, ascending. */
  levels: number[];
  /** The source's time between two tokens of a stream. */
  intervalMs: number;
  /** Tokens per stream (its max_tokens). */
  tokens: number;
  /** JSON results file; undefined writes none. */
  output: string | undefined;
  /** Where the pool core's V8 CPU profile is written when it stops; undefined runs it unprofiled. */
  cpuProfileDir: string | undefined;
  /** A checkout (e.g. the commit before a change) whose pool core runs beside this one, level by level; undefined: none. */
  baselinePoolTree?: string | undefined;
}

export const RELAY_BENCH_USAGE = `agentix bench relay [options]   streaming relay throughput: engine direct vs pool

Opens N concurrent streams (each on its own connection) to a paced token source, which
emits one OpenAI chunk per stream every interval, directly and through one pool core,
and measures the tokens/s each delivers to the client, inter-token gaps and time to
first token, per level; the pool saturates at the first level where it delivers
< 95 % of what is offered or its p99 gap passes 2 × the interval.

  --levels LIST        concurrent streams per level (default 100,250,500,1000,2000)
  --interval-ms N      time between tokens of a stream (default 20: 50 tokens/s, a real engine's pace)
  --tokens N           tokens per stream (default 200: 4 s at 20 ms)
  --targets LIST       of engine,pool (default both; engine direct is the baseline)
  --output FILE        JSON results (default bench-results/relay.json)
  --cpu-profile DIR    write the pool core's V8 CPU profile (.cpuprofile; summarise it with
                       npm run bench:profile -- FILE) into DIR when it stops
  --baseline-pool DIR|REV  also run the pool core of another checkout DIR (its own src/, with
                       node_modules), or of git revision REV of this repository (extracted to the
                       temp directory), as "pool0", in the same
                       levels, beside this one's (the order reversed every other level):
                       a before/after in one run`;

/** Parses the flags; throws with a clear message on any bad value. Returns undefined for --help. */
export function parseRelayBenchArgs(argv: string[], root: string): RelayBenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      levels: { type: "string" },
      "interval-ms": { type: "string" },
      tokens: { type: "string" },
      targets: { type: "string" },
      output: { type: "string" },
      "cpu-profile": { type: "string" },
      "baseline-pool": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return undefined;
  const levels = (values.levels ?? "100,250,500,1000,2000").split(",").map((raw) => positiveInt("levels", raw.trim(), 1, 10_000));
  return {
    targets: listOf("targets", values.targets, RELAY_TARGETS),
    levels: [...new Set(levels)].sort((a, b) => a - b),
    intervalMs: positiveNumber("interval-ms", values["interval-ms"], 20, 10_000),
    tokens: positiveInt("tokens", values.tokens, 200, 100_000),
    output: path.resolve(root, values.output ?? "bench-results/relay.json"),
    cpuProfileDir: values["cpu-profile"] === undefined ? undefined : path.resolve(root, values["cpu-profile"]),
    baselinePoolTree: values["baseline-pool"] === undefined ? undefined : sourceTreeOf(values["baseline-pool"], root),
  };
}
