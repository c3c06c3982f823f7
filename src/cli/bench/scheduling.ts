import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { simulate } from "../../sim/des/simulate.js";
import type { BenchReport } from "../../sim/report/bench-report.js";
import { renderHtmlReport } from "../../sim/report/html.js";
import { allTables, formatTextTable, paperLines, tablePreamble } from "../../sim/report/table.js";
import { isBuiltinWorkload, loadWorkload } from "../../sim/workload/load.js";
import { parseSchedulingBenchArgs, SCHEDULING_BENCH_USAGE } from "./scheduling-options.js";
import { BenchProgress, type ProgressSink } from "./scheduling-progress.js";
import { REGIMES } from "./scheduling-regimes.js";
import { runSchedulingSweep, type Simulate } from "./scheduling-sweep.js";
import { workerExecutor } from "./scheduling-workers.js";

/*
 * `agentix bench` (scheduling): runs the sweep, prints the tables on stdout (the
 * headline, engagement, the latency curve, per kind and tenant, the regime's goals),
 * writes the JSON and the HTML report. Progress goes to stderr.
 */

export interface SchedulingBenchIo {
  stdout: (text: string) => void;
  stderr: ProgressSink;
  simulate: Simulate;
  /** Resolves --out and a --workload path. */
  cwd: string;
  now: () => number;
  date: () => Date;
}

export interface SchedulingBenchOutput {
  report: BenchReport;
  jsonPath: string;
  htmlPath: string;
}

function defaultIo(): SchedulingBenchIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: process.stderr,
    simulate,
    cwd: process.cwd(),
    now: () => performance.now(),
    date: () => new Date(),
  };
}

/** "2026-05-01T12:03:04.000Z" → "20260501-120304": sortable, filename-safe. */
function stamp(date: Date): string {
  return date.toISOString().replace(/\.\d+Z$/, "").replace(/[-:]/g, "").replace("T", "-");
}

/** Relative to the working directory when inside it, else absolute. */
function shortPath(cwd: string, file: string): string {
  const relative = path.relative(cwd, file);
  return relative === "" || relative.startsWith("..") || path.isAbsolute(relative) ? file : relative;
}

function fileSafe(name: string): string {
  return name.replace(/[^\w.-]+/g, "_").slice(0, 60) || "workload";
}

/** The whole benchmark with injectable I/O; returns undefined for --help. */
export async function runSchedulingBenchWith(argv: string[], io: SchedulingBenchIo): Promise<SchedulingBenchOutput | undefined> {
  const options = parseSchedulingBenchArgs(argv);
  if (options === undefined) {
    io.stdout(`${SCHEDULING_BENCH_USAGE}\n`);
    return undefined;
  }
  const workload = await loadWorkload(isBuiltinWorkload(options.workload) ? options.workload : path.resolve(io.cwd, options.workload));
  const progress = new BenchProgress(io.stderr, 0, io.now);
  const date = io.date();
  const regime = options.regime === undefined ? undefined : REGIMES[options.regime];
  let report: BenchReport;
  try {
    report = await runSchedulingSweep(
      options,
      options.workload,
      workload,
      {
        simulate: io.simulate,
        // Worker threads run the real simulator; an injected one (tests) runs here.
        ...(options.jobs > 1 && io.simulate === simulate ? { executor: workerExecutor(options.jobs, { warmupFraction: options.warmupFraction, cooldownFraction: options.cooldownFraction }) } : {}),
        progress,
        now: io.now,
        createdAt: date.toISOString(),
        command: ["agentix bench", ...argv].join(" "),
      },
      regime === undefined ? {} : { regime },
    );
  } finally {
    progress.finish();
  }
  if (regime !== undefined && options.regimeOverrides.length > 0) {
    report.notes.unshift(`regime ${regime.name} with ${options.regimeOverrides.join(", ")} given on the command line: the goals are checked on this modified setting.`);
  }

  const outDir = path.resolve(io.cwd, options.outDir);
  await mkdir(outDir, { recursive: true });
  const base = path.join(outDir, `scheduling-${fileSafe(regime === undefined ? workload.name : `${regime.name}-${workload.name}`)}-${stamp(date)}`);
  const jsonPath = `${base}.json`;
  const htmlPath = `${base}.html`;
  await writeFile(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
  await writeFile(htmlPath, renderHtmlReport(report));

  const title = regime === undefined ? [] : [`${regime.title}`, regime.description, ""];
  const paper = paperLines(report);
  io.stdout(`\n${[...title, tablePreamble(report)].join("\n")}\n\n${allTables(report).map(formatTextTable).join("\n")}${paper === "" ? "" : `\n${paper}\n`}\nwall time ${(report.wallMs / 1_000).toFixed(0)} s\n`);
  io.stdout(`JSON  ${shortPath(io.cwd, jsonPath)}\nHTML  ${shortPath(io.cwd, htmlPath)}\n`);
  return { report, jsonPath, htmlPath };
}

/** `agentix bench [options]`: what the CLI's main wires. */
export async function runSchedulingBench(argv: string[]): Promise<void> {
  await runSchedulingBenchWith(argv, defaultIo());
}
