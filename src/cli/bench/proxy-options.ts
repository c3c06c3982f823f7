import path from "node:path";
import { parseArgs } from "node:util";
import { listOf, oneOf, positiveInt, positiveNumber } from "./flag-values.js";
import { placementHelp, PLACEMENTS, type Placement } from "./placement.js";
import { sourceTreeOf } from "./source-tree.js";

/*
 * Flags of `agentix bench proxy` / `npm run bench:proxy`. Defaults: 5 targets × 2 modes
 * × 3 concurrency levels × 3 rounds of 3 s, about six minutes with the edge's start.
 */

export const PROXY_TARGETS = ["engine", "node-proxy", "pool", "portkey", "edge"] as const;
/** The targets, and a second pool core built from another tree (--baseline-pool), measured in the same rounds. */
export type ProxyTargetName = (typeof PROXY_TARGETS)[number] | "pool-baseline";

export const PROXY_MODES = ["non-streaming", "streaming"] as const;
export type ProxyMode = (typeof PROXY_MODES)[number];

export interface ProxyBenchOptions {
  targets: ProxyTargetName[];
  modes: ProxyMode[];
  /** Seconds of each measured run. */
  durationSeconds: number;
  /** Seconds of the discarded run before each target's measurements, per mode (at the highest level). */
  warmupSeconds: number;
  /** Times every (mode, level) is measured on every target, targets in alternating order; figures are medians of rounds. */
  rounds: number;
  /** Concurrency levels (open connections), ascending; max throughput is the best of them. */
  connections: number[];
  /** The level whose requests/s and latencies are the headline figures; one of `connections`. */
  moderateConnections: number;
  /** Completion tokens per request (ignore_eos, so exactly this many). */
  maxTokens: number;
  /** The pool's per-engine buffer (maxInFlight) in (b) and (d). */
  engineInFlight: number;
  /** JSON results file; undefined writes none. */
  output: string | undefined;
  /** Where the pool core's V8 CPU profile is written when it stops; undefined runs it unprofiled. */
  cpuProfileDir: string | undefined;
  /** A checkout (e.g. the commit before a change) whose pool core runs beside this one as (b0); undefined: none. */
  baselinePoolTree?: string | undefined;
  /** The checkout whose pool core is (b); undefined: this one. */
  poolTree?: string | undefined;
  /** Where the load generator and the servers run (placement.ts). */
  placement: Placement;
}

export const PROXY_BENCH_USAGE = `agentix bench proxy [options]   proxy overhead: engine direct vs pool vs Portkey vs edge

Sends the same chat-completions requests (max_tokens N, ignore_eos) to a zero-model-time
simulated engine directly and through each proxy, at a few concurrency levels.

  --targets LIST       of engine,node-proxy,pool,portkey,edge (default all; engine is the
                       baseline, node-proxy a minimal node:http proxy: the floor of a Node hop)
  --modes LIST         of non-streaming,streaming (default both)
  --duration S         seconds per measured run (default 3)
  --rounds N           measured rounds, targets in alternating order; medians reported (default 3)
  --warmup S           discarded warm-up seconds per target and mode, at the highest level (default 3)
  --connections LIST   concurrency levels (default 1,16,64)
  --moderate N         headline concurrency level (default 16; added to the levels if missing)
  --max-tokens N       completion tokens per request (default 16)
  --engine-in-flight N pool's per-engine buffer (default: the highest level, so the pool never holds calls back)
  --output FILE        JSON results (default bench-results/proxy.json)
  --baseline-pool DIR|REV  also run the pool core of another checkout DIR (its own src/, with
                       node_modules), or of git revision REV of this repository (extracted to the
                       temp directory, this tree's node_modules linked), as (b0), in the same
                       rounds: a before/after in one run
  --pool-tree DIR|REV  run (b) from that checkout or revision instead of this one
  --cpu-profile DIR    write the pool core's V8 CPU profile (.cpuprofile, for Chrome DevTools
                       or speedscope) into DIR when it stops
  --placement NAME     where the load generator (the client), the engine and the proxies run,
                       the same for every target:
                       ${placementHelp("                       ")}`;

/** Parses the flags; throws with a clear message on any bad value. Returns undefined for --help. */
export function parseProxyBenchArgs(argv: string[], root: string): ProxyBenchOptions | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      targets: { type: "string" },
      modes: { type: "string" },
      duration: { type: "string" },
      warmup: { type: "string" },
      rounds: { type: "string" },
      connections: { type: "string" },
      moderate: { type: "string" },
      "max-tokens": { type: "string" },
      "engine-in-flight": { type: "string" },
      output: { type: "string" },
      "cpu-profile": { type: "string" },
      "baseline-pool": { type: "string" },
      "pool-tree": { type: "string" },
      placement: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return undefined;

  const moderateConnections = positiveInt("moderate", values.moderate, 16, 10_000);
  const levels = (values.connections ?? "1,16,64").split(",").map((raw) => positiveInt("connections", raw.trim(), 1, 10_000));
  const connections = [...new Set([...levels, moderateConnections])].sort((a, b) => a - b);
  const highest = connections[connections.length - 1] ?? moderateConnections;
  const warmupSeconds = values.warmup === "0" ? 0 : positiveNumber("warmup", values.warmup, 3, 600);

  return {
    targets: listOf("targets", values.targets, PROXY_TARGETS),
    modes: listOf("modes", values.modes, PROXY_MODES),
    durationSeconds: positiveNumber("duration", values.duration, 3, 600),
    warmupSeconds,
    rounds: positiveInt("rounds", values.rounds, 3, 100),
    connections,
    moderateConnections,
    maxTokens: positiveInt("max-tokens", values["max-tokens"], 16, 4096),
    engineInFlight: positiveInt("engine-in-flight", values["engine-in-flight"], highest, 10_000),
    output: path.resolve(root, values.output ?? "bench-results/proxy.json"),
    cpuProfileDir: values["cpu-profile"] === undefined ? undefined : path.resolve(root, values["cpu-profile"]),
    baselinePoolTree: values["baseline-pool"] === undefined ? undefined : sourceTreeOf(values["baseline-pool"], root),
    poolTree: values["pool-tree"] === undefined ? undefined : sourceTreeOf(values["pool-tree"], root),
    placement: oneOf("placement", values.placement, PLACEMENTS, "free"),
  };
}
