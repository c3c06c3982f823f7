#!/usr/bin/env node
import { BenchInterrupted } from "./interruptible-run.js";
import { runRelayBench } from "./relay-bench.js";

/* Entry of `npm run bench:relay` (the `agentix bench relay` command runs the same function). */

runRelayBench(process.argv.slice(2)).then(
  // Exit explicitly: a server handle left open by mistake must not keep the bench alive.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(error instanceof BenchInterrupted ? 130 : 1);
  },
);
