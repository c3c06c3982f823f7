#!/usr/bin/env node
import { formatBranchReport, runBranchBench } from "./evolve-branches.js";
import { EVOLVE_BENCH_USAGE, formatEvolveKvReport, formatEvolveReport, parseEvolveBenchArgs, runEvolveBench, runEvolveKvVariants } from "./evolve.js";

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
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
