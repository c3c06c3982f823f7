/*
 * `npm run bench:tao`: TAO's joint placement ("agentix-tao") against the routers in
 * the discrete-event simulator, side by side on the coding-agent and
 * function-calling built-ins at three arrival rates each (tao-options.ts): job
 * latency, TTFT, decode throughput, prefix-cache hit rate (tao-metrics.ts); the
 * planner's fallback rate and wall time per plan; the readiness predictor's error
 * per source on the simulated traces; and every metric where agentix-tao loses.
 * Prints tables on stdout, progress on stderr, writes <out>/tao.json.
 */

import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { PolicyName } from "../../sim/des/policies.js";
import { simulate, type SimulationConfig, type SimulationResult } from "../../sim/des/simulate.js";
import { DEFAULT_PROFILE } from "../../sim/profiles.js";
import { generatePrograms } from "../../sim/workload/generate.js";
import { isBuiltinWorkload, loadWorkload } from "../../sim/workload/load.js";
import type { Workload } from "../../sim/workload/schema.js";
import { planTiming, runMetrics } from "./tao-metrics.js";
import { parseTaoBenchArgs, resolveWorkloadRun, TAO_BENCH_USAGE, type TaoBenchOptions } from "./tao-options.js";
import {
  findLosses,
  policyLabel,
  lossLines,
  metricsTable,
  plannerTable,
  readinessTable,
  type TaoBenchReport,
  type TaoBenchRun,
  type TaoPlannerFigures,
} from "./tao-report.js";

export interface TaoBenchIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Resolves --out. */
  cwd: string;
  date: () => Date;
  now: () => number;
  simulate: (config: SimulationConfig) => SimulationResult;
}

function defaultIo(): TaoBenchIo {
  return {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    cwd: process.cwd(),
    date: () => new Date(),
    now: () => performance.now(),
    simulate,
  };
}

/** Long enough for every program of the default runs to finish (the coding agent's tool times reach an hour). */
const MAX_SIM_MS = 6 * 3_600_000;

function plannerFigures(result: SimulationResult, planWallMs: number[]): TaoPlannerFigures | undefined {
  const tao = result.tao;
  if (tao === undefined) return undefined;
  const { planner, ...rest } = tao;
  return {
    ...rest,
    planTime: planTiming(planWallMs),
    dpPlans: planner.dp,
    fallbacks: planner.fallbacks,
    fallbackRate: planner.plans > 0 ? planner.fallbacks / planner.plans : Number.NaN,
    fallbacksAtBound: planner.fallbacksAtBound,
    maxStateSpace: planner.maxStateSpace,
  };
}

export async function runTaoBenchWith(argv: string[], io: TaoBenchIo): Promise<{ report: TaoBenchReport; jsonPath: string } | undefined> {
  const options: TaoBenchOptions | undefined = parseTaoBenchArgs(argv);
  if (options === undefined) {
    io.stdout(`${TAO_BENCH_USAGE}\n`);
    return undefined;
  }
  const started = io.now();
  // Workloads by name or file (a path resolves against the working directory), and each one's programs and rates.
  const loaded = new Map<string, Workload>();
  for (const name of options.workloads) loaded.set(name, await loadWorkload(isBuiltinWorkload(name) ? name : path.resolve(io.cwd, name)));
  for (const [name, workload] of loaded) {
    const { programs, rates } = resolveWorkloadRun(options, name, workload);
    options.programs[name] = programs;
    options.rates[name] = rates;
  }
  const runs: TaoBenchRun[] = [];
  // agentix-tao runs once per hold value, every other policy once.
  const variants = options.policies.flatMap((policy): { policy: PolicyName; holdMs: number | undefined }[] =>
    policy === "agentix-tao" ? options.holdMs.map((holdMs) => ({ policy, holdMs })) : [{ policy, holdMs: undefined }],
  );
  const total = options.workloads.reduce((n, w) => n + (options.rates[w]?.length ?? 0) * variants.length, 0);
  for (const workloadName of options.workloads) {
    const workload = loaded.get(workloadName) as Workload;
    for (const rate of options.rates[workloadName] ?? []) {
      const programs = generatePrograms({ ...workload, arrival: { process: "poisson", ratePerSec: rate } }, { seed: options.seed, count: options.programs[workloadName] });
      for (const { policy, holdMs } of variants) {
        const planWallMs: number[] = [];
        const runStart = io.now();
        const result = io.simulate({
          programs,
          policy,
          engines: options.engines,
          recordCalls: true,
          maxSimMs: MAX_SIM_MS,
          tao: { replanIntervalMs: options.replanMs, ...(holdMs === undefined ? {} : { holdLeftOutMs: holdMs }), onPlan: ({ wallMs }) => planWallMs.push(wallMs) },
        });
        const tao = plannerFigures(result, planWallMs);
        const run: TaoBenchRun = { workload: workloadName, ratePerSec: rate, policy, metrics: runMetrics(result), ...(holdMs === undefined ? {} : { holdMs }), ...(tao === undefined ? {} : { tao }) };
        runs.push(run);
        io.stderr(`[${runs.length}/${total}] ${workloadName} @ ${rate}/s ${policyLabel(run, options.holdMs.length > 1)}: ${((io.now() - runStart) / 1_000).toFixed(1)} s\n`);
      }
    }
  }

  const report: TaoBenchReport = {
    createdAt: io.date().toISOString(),
    command: ["npm run bench:tao --", ...argv].join(" "),
    config: {
      workloads: options.workloads,
      policies: options.policies,
      engines: options.engines,
      seed: options.seed,
      programs: Object.fromEntries(options.workloads.map((w) => [w, options.programs[w] ?? 0])),
      rates: Object.fromEntries(options.workloads.map((w) => [w, options.rates[w] ?? []])),
      replanMs: options.replanMs,
      holdMs: options.holdMs,
      engineProfile: DEFAULT_PROFILE,
      quick: options.quick,
    },
    runs,
    losses: findLosses(runs),
    wallMs: io.now() - started,
  };

  const outDir = path.resolve(io.cwd, options.outDir);
  await mkdir(outDir, { recursive: true });
  const jsonPath = path.join(outDir, "tao.json");
  await writeFile(jsonPath, `${JSON.stringify(report, null, 2)}\n`);

  const out: string[] = [];
  out.push(`TAO placement vs routers: ${options.engines} engines (${DEFAULT_PROFILE}), Poisson arrivals, seed ${options.seed}; virtual time.`);
  for (const workloadName of options.workloads) {
    const of = runs.filter((r) => r.workload === workloadName);
    out.push("", `${workloadName}: ${options.programs[workloadName]} programs per run`, metricsTable(of));
  }
  if (runs.some((r) => r.tao !== undefined)) {
    out.push("", "TAO planner (agentix-tao runs; plan time is wall-clock on this machine)", plannerTable(runs));
    out.push("", "Readiness predictor error on the simulated traces (agentix-tao runs)", readinessTable(runs));
  }
  out.push("", "Where agentix-tao loses (worse than the best other policy by more than 2 %)", lossLines(report.losses));
  out.push("", `JSON  ${path.relative(io.cwd, jsonPath) || jsonPath}   (${(report.wallMs / 1_000).toFixed(0)} s)`);
  io.stdout(`${out.join("\n")}\n`);
  return { report, jsonPath };
}

/** `npm run bench:tao -- [options]`. */
export async function runTaoBench(argv: string[]): Promise<TaoBenchReport | undefined> {
  return (await runTaoBenchWith(argv, defaultIo()))?.report;
}
