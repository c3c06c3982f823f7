#!/usr/bin/env node
import { HOP_TRACE_USAGE, parseHopTraceArgs, runHopTrace } from "./hop-trace.js";
import { projectRoot } from "./proxy-run.js";

/* Entry of `npm run bench:hop` (hop-trace.ts). */

const options = parseHopTraceArgs(process.argv.slice(2), projectRoot);
if (options === undefined) {
  console.log(HOP_TRACE_USAGE);
  process.exit(0);
}
runHopTrace(options, (line) => console.error(`[bench:hop] ${line}`)).then(
  (report) => {
    console.log(report);
    process.exit(0);
  },
  (error: unknown) => {
    console.error(error instanceof Error ? error.stack : error);
    process.exit(1);
  },
);
