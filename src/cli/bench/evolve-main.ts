#!/usr/bin/env node
import { formatBranchReport, runBranchBench } from "./evolve-branches.js";
import { formatCapacityReport, runCapacityBench } from "./evolve-capacity.js";
import { EVOLVE_BENCH_USAGE, formatEvolveKvReport, formatEvolveReport, parseEvolveBenchArgs, runEvolveBench, runEvolveKvVariants, startingSplit } from "./evolve.js";

/* Entry of `npm run bench:evolve` (tsx src/cli/bench/evolve-main.ts). */

try {
  const options = parseEvolveBenchArgs(process.argv.slice(2));
  if (options === undefined) console.log(EVOLVE_BENCH_USAGE);
  else {
    const all = options.only === undefined;
    if (all || options.only === "policies") process.stdout.write(formatEvolveReport(runEvolveBench(options), options));
    if (all) process.stdout.write("\n");
    if (all || options.only === "kv") process.stdout.write(formatEvolveKvReport(runEvolveKvVariants(options), options));
    if (all) process.stdout.write("\n");
    if (all || options.only === "branches") process.stdout.write(formatBranchReport(runBranchBench(options), options));
    // Minutes of bisection: asked for by name only.
    if (options.only === "capacity") process.stdout.write(formatCapacityReport(runCapacityBench(options, startingSplit(options), (line) => console.error(line)), options));
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
