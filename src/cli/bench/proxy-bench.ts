import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { PROXY_BENCH_USAGE, parseProxyBenchArgs } from "./proxy-options.js";
import { formatProxyTable, proxyFailures, proxyReportHeader, summariseProxyReport } from "./proxy-report.js";
import { measureProxyOverhead, projectRoot } from "./proxy-run.js";

/*
 * `agentix bench proxy`: measures, prints the table on stdout (progress on stderr),
 * writes the JSON, and fails (rejects) when any target answered anything but
 * complete 2xx completions, so no figure is ever one of error responses.
 * Ctrl-C (SIGINT) or SIGTERM stops the current run and every server it started.
 */

export class ProxyBenchInterrupted extends Error {
  constructor(readonly signal: NodeJS.Signals) {
    super(`proxy benchmark interrupted by ${signal}; every server it started has been stopped`);
    this.name = "ProxyBenchInterrupted";
  }
}

export async function runProxyBench(argv: string[]): Promise<void> {
  const options = parseProxyBenchArgs(argv, projectRoot);
  if (!options) {
    console.log(PROXY_BENCH_USAGE);
    return;
  }

  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // A second Ctrl-C: stop waiting; exit hooks still kill the child processes.
      console.error(`\n${signal} again: exiting now`);
      process.exit(130);
    }
    console.error(`\n${signal}: stopping the run and every server… (again to force)`);
    controller.abort(new ProxyBenchInterrupted(signal));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    const report = await measureProxyOverhead(options, {
      log: (line) => console.error(`[bench:proxy] ${line}`),
      signal: controller.signal,
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
  } catch (error) {
    // An interrupted run surfaces as the abort reason, whichever step it stopped.
    if (controller.signal.aborted) throw controller.signal.reason;
    throw error;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}
