#!/usr/bin/env node
import { runSchedulingBench } from "./scheduling.js";

/* Entry of `npm run bench`; `agentix bench` reaches the same function through src/cli/main.ts. */

runSchedulingBench(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
