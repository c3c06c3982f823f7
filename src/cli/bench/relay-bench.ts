import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { runInterruptibly } from "./interruptible-run.js";
import { projectRoot } from "./proxy-run.js";
import { parseRelayBenchArgs, RELAY_BENCH_USAGE } from "./relay-options.js";
import { formatRelayTable, formatRelayVerdict, relayFailures, relayReportHeader, summariseRelayReport } from "./relay-report.js";
import { measureRelayThroughput } from "./relay-run.js";

/*
 * `npm run bench:relay`: measures, prints the table and the saturation point on stdout
 * (progress on stderr), writes the JSON, and fails (rejects) when any level had a
 * broken or short stream, after printing, so such a level is never read as a figure.
 * Ctrl-C (SIGINT) or SIGTERM stops the run and every server it started.
 */

export async function runRelayBench(argv: string[]): Promise<void> {
  const options = parseRelayBenchArgs(argv, projectRoot);
  if (!options) {
    console.log(RELAY_BENCH_USAGE);
    return;
  }
  await runInterruptibly("relay", async (signal) => {
    const report = await measureRelayThroughput(options, {
      log: (line) => console.error(`[bench:relay] ${line}`),
      signal,
    });
    const summary = summariseRelayReport(report);
    const failures = relayFailures(summary);
    console.log(`\n${relayReportHeader(report)}\n\n${formatRelayTable(report, summary)}\n\n${formatRelayVerdict(report, summary)}\n`);
    if (options.cpuProfileDir) console.log(`Pool CPU profile: ${options.cpuProfileDir} (npm run bench:profile -- FILE)`);
    if (options.output) {
      await mkdir(path.dirname(options.output), { recursive: true });
      await writeFile(options.output, `${JSON.stringify({ ...report, summary, ok: failures.length === 0, failures }, null, 2)}\n`);
      console.log(`Results: ${path.relative(process.cwd(), options.output) || options.output}`);
    }
    if (failures.length > 0) {
      throw new Error(`BENCHMARK FAILED: levels with broken or short streams, so they have no figure:\n  ${failures.join("\n  ")}`);
    }
  });
}
