#!/usr/bin/env node
import { EVOLVE_BENCH_USAGE, formatEvolveKvReport, formatEvolveReport, parseEvolveBenchArgs, runEvolveBench, runEvolveKvVariants } from "./evolve.js";

/* Entry of `npm run bench:evolve` (tsx src/cli/bench/evolve-main.ts). */

try {
  const options = parseEvolveBenchArgs(process.argv.slice(2));
  if (options === undefined) console.log(EVOLVE_BENCH_USAGE);
  else {
    if (options.only !== "kv") process.stdout.write(formatEvolveReport(runEvolveBench(options), options));
    if (options.only === undefined) process.stdout.write("\n");
    if (options.only !== "policies") process.stdout.write(formatEvolveKvReport(runEvolveKvVariants(options), options));
  }
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
