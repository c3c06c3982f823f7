#!/usr/bin/env node
import { BenchInterrupted } from "./interruptible-run.js";
import { runProxyBench } from "./proxy-bench.js";

/* Entry of `npm run bench:proxy` (the `agentix bench proxy` command runs the same function). */

runProxyBench(process.argv.slice(2)).then(
  // Exit explicitly: a server handle left open by mistake must not keep the bench alive.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(error instanceof BenchInterrupted ? 130 : 1);
  },
);
