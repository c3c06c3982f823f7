import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { runInterruptibly } from "./interruptible-run.js";
import { PROXY_BENCH_USAGE, parseProxyBenchArgs } from "./proxy-options.js";
import { formatProxyTable, proxyFailures, proxyReportHeader, summariseProxyReport } from "./proxy-report.js";
import { measureProxyOverhead, projectRoot } from "./proxy-run.js";

/*
 * `agentix bench proxy`: measures, prints the table on stdout (progress on stderr),
 * writes the JSON, and fails (rejects) when any target answered anything but
 * complete 2xx completions, so no figure is ever one of error responses.
 * Ctrl-C (SIGINT) or SIGTERM stops the current run and every server it started.
 */

export async function runProxyBench(argv: string[]): Promise<void> {
  const options = parseProxyBenchArgs(argv, projectRoot);
  if (!options) {
    console.log(PROXY_BENCH_USAGE);
    return;
  }

  await runInterruptibly("proxy", async (signal) => {
    const report = await measureProxyOverhead(options, {
      log: (line) => console.error(`[bench:proxy] ${line}`),
      signal,
    });
    const { rows, edgeOnly } = summariseProxyReport(report);
    const failures = proxyFailures(rows);

    console.log(`\n${proxyReportHeader(report)}\n\n${formatProxyTable(report)}\n`);
    if (options.output) {
      await mkdir(path.dirname(options.output), { recursive: true });
      const json = { ...report, summary: rows, edgeOnly, ok: failures.length === 0, failures };
      await writeFile(options.output, `${JSON.stringify(json, null, 2)}\n`);
      console.log(`Results: ${path.relative(process.cwd(), options.output) || options.output}`);
    }
    if (failures.length > 0) {
      throw new Error(
        `BENCHMARK FAILED: targets answered with errors, so their figures are not valid:\n  ${failures.join("\n  ")}`,
      );
    }
  });
}
