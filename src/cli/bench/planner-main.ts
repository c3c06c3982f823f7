/*
 * `npm run bench:planner` (tsx src/cli/bench/planner-main.ts): TAO planner time on
 * random loaded-pool snapshots (default 160 waiting programs × 8 engines, 500
 * snapshots), next to TAO's published 1.59 ms mean / 3.68 ms p95; the DP-vs-fallback
 * rate at several state budgets; and best-fit-decreasing alone on the same snapshots,
 * as the baseline, with how often it misses the optimum where the DP can tell.
 * Timings are wall-clock on this machine, after a warm-up; nothing is asserted.
 */

import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { compareObjectives, type PlanObjective } from "../../core/tao/objective.js";
import { createPlannerStats, planPlacement, planStateSpace } from "../../core/tao/planner.js";
import { DEFAULT_PLANNER_SETTINGS, MAX_STATE_BUDGET, type PlannerSettings } from "../../core/tao/settings.js";
import type { TaoSnapshot } from "../../core/tao/snapshot.js";
import { randomSnapshot, seededRandom } from "./planner-snapshots.js";

const PUBLISHED = { meanMs: 1.59, p95Ms: 3.68 };

const USAGE = `bench:planner [options]   TAO planner time and DP/fallback rates

  --snapshots N   random snapshots (default 500)
  --programs N    waiting programs per snapshot (default 160)
  --engines N     engines per snapshot (default 8)
  --quantum N     Δ in tokens (default ${DEFAULT_PLANNER_SETTINGS.quantumTokens})
  --budgets LIST  DP state budgets to compare (default 20000,50000,<default>,1000000)
  --seed N        random seed (default 1)
  --json          print the results as JSON instead of tables`;

function positiveInt(flag: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${flag} must be an integer >= 1, got "${raw}"`);
  return value;
}

interface Timing {
  /** Process CPU time (user + system) per plan: unlike wall-clock, not inflated while other processes hold the CPUs. */
  cpuMeanMs: number;
  meanMs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

function timing(samples: number[], cpuMicros = Number.NaN): Timing {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  const n = Math.max(1, sorted.length);
  return { cpuMeanMs: cpuMicros / 1_000 / n, meanMs: sorted.reduce((a, b) => a + b, 0) / n, p50Ms: at(0.5), p95Ms: at(0.95), maxMs: sorted.at(-1) ?? Number.NaN };
}

function cpuMicrosSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return used.user + used.system;
}

interface BudgetRow {
  budget: number;
  time: Timing;
  dpShare: number;
  fallbacks: number;
  fallbacksAtBound: number;
  /** DP plans only. */
  dpTime: Timing;
}

function timed<T>(run: () => T): { value: T; ms: number } {
  const start = performance.now();
  const value = run();
  return { value, ms: performance.now() - start };
}

function runBudget(snapshots: TaoSnapshot[], settings: PlannerSettings): BudgetRow {
  const stats = createPlannerStats();
  const all: number[] = [];
  const dp: number[] = [];
  const cpu = process.cpuUsage();
  for (const snapshot of snapshots) {
    const { value: plan, ms } = timed(() => planPlacement(snapshot, settings, { stats }));
    all.push(ms);
    if (plan.method === "dp") dp.push(ms);
  }
  return {
    budget: settings.stateBudget,
    time: timing(all, cpuMicrosSince(cpu)),
    dpShare: stats.dp / Math.max(1, stats.plans),
    fallbacks: stats.fallbacks,
    fallbacksAtBound: stats.fallbacksAtBound,
    dpTime: timing(dp),
  };
}

interface BaselineRow {
  time: Timing;
  /** Snapshots whose optimum the DP could compute (state space <= the largest DP allowed). */
  compared: number;
  /** Of those, where best-fit-decreasing reached the optimum objective. */
  optimal: number;
  /** Mean share of the optimum's credit / admitted ready / tokens that best-fit reached. */
  creditShare: number;
  readyShare: number;
  tokensShare: number;
}

function runBaseline(snapshots: TaoSnapshot[], settings: PlannerSettings, optima: (PlanObjective | undefined)[]): BaselineRow {
  const times: number[] = [];
  let compared = 0;
  let optimal = 0;
  const shares = { credit: 0, ready: 0, tokens: 0 };
  const cpu = process.cpuUsage();
  const plans = snapshots.map((snapshot) => {
    const { value: plan, ms } = timed(() => planPlacement(snapshot, settings, { method: "best-fit-decreasing" }));
    times.push(ms);
    return plan;
  });
  const cpuMicros = cpuMicrosSince(cpu);
  plans.forEach((plan, i) => {
    const best = optima[i];
    if (best === undefined) return;
    compared += 1;
    if (compareObjectives(plan.objective, best) === 0) optimal += 1;
    shares.credit += best.credit === 0 ? 1 : plan.objective.credit / best.credit;
    shares.ready += best.ready === 0 ? 1 : plan.objective.ready / best.ready;
    shares.tokens += best.tokens === 0 ? 1 : plan.objective.tokens / best.tokens;
  });
  const n = Math.max(1, compared);
  return { time: timing(times, cpuMicros), compared, optimal, creditShare: shares.credit / n, readyShare: shares.ready / n, tokensShare: shares.tokens / n };
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(3) : "-");
const pct = (value: number) => `${(100 * value).toFixed(1)} %`;

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i] ?? 0)).join("  ");
  return [line(header), line(widths.map((w) => "-".repeat(w))), ...rows.map(line)].join("\n");
}

function main(argv: string[]): void {
  const { values } = parseArgs({
    args: argv,
    options: {
      snapshots: { type: "string" },
      programs: { type: "string" },
      engines: { type: "string" },
      quantum: { type: "string" },
      budgets: { type: "string" },
      seed: { type: "string" },
      json: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const count = positiveInt("snapshots", values.snapshots, 500);
  const shape = {
    programs: positiveInt("programs", values.programs, 160),
    engines: positiveInt("engines", values.engines, 8),
    quantumTokens: positiveInt("quantum", values.quantum, DEFAULT_PLANNER_SETTINGS.quantumTokens),
  };
  const budgets = (values.budgets ?? `20000,50000,${DEFAULT_PLANNER_SETTINGS.stateBudget},1000000`).split(",").map((raw) => {
    const budget = Number(raw.trim());
    if (!Number.isInteger(budget) || budget < 0 || budget > MAX_STATE_BUDGET) throw new Error(`--budgets takes integers in [0, ${MAX_STATE_BUDGET}], got "${raw}"`);
    return budget;
  });
  const seed = positiveInt("seed", values.seed, 1);

  const random = seededRandom(seed);
  const snapshots = Array.from({ length: count }, (_, i) => randomSnapshot(random, shape, i * 100));
  const settingsFor = (stateBudget: number): PlannerSettings => ({ ...DEFAULT_PLANNER_SETTINGS, quantumTokens: shape.quantumTokens, stateBudget });
  const stateSpaces = snapshots.map((snapshot) => planStateSpace(snapshot, settingsFor(0)));
  const sizes = [...stateSpaces].sort((a, b) => a - b);

  // Each configuration runs twice and the second pass counts: the first settles the JIT
  // and the heap left by the previous configuration.
  runBaseline(snapshots, settingsFor(0), []);
  const baselineTimes = runBaseline(snapshots, settingsFor(0), []).time;
  const rows = budgets.map((budget) => {
    runBudget(snapshots, settingsFor(budget));
    return runBudget(snapshots, settingsFor(budget));
  });
  // The optimum, where the DP can compute it in reasonable time, to grade the baseline.
  const exactLimit = Math.min(MAX_STATE_BUDGET, 5_000_000);
  const optima = snapshots.map((snapshot, i) =>
    (stateSpaces[i] ?? Number.POSITIVE_INFINITY) <= exactLimit ? planPlacement(snapshot, settingsFor(MAX_STATE_BUDGET), { method: "dp" }).objective : undefined,
  );
  const baseline = { ...runBaseline(snapshots, settingsFor(0), optima), time: baselineTimes };

  const quantile = (q: number) => sizes[Math.min(sizes.length - 1, Math.floor(q * sizes.length))] ?? 0;
  if (values.json) {
    console.log(JSON.stringify({ shape, snapshots: count, seed, loadAverage: loadavg(), published: PUBLISHED, stateSpace: { p10: quantile(0.1), p50: quantile(0.5), p90: quantile(0.9) }, budgets: rows, baseline }, null, 2));
    return;
  }
  console.log(`TAO planner: ${count} random snapshots, ${shape.programs} waiting programs × ${shape.engines} engines, Δ = ${shape.quantumTokens} tokens, seed ${seed}`);
  console.log(`DP state space (candidates × Π(quanta + 1)): p10 ${quantile(0.1)}, p50 ${quantile(0.5)}, p90 ${quantile(0.9)}`);
  // Wall-clock figures mean little on a busy machine: say how busy it was.
  console.log(`machine: ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(" / ")} (1 / 5 / 15 min) at the end\n`);
  const header = ["planner", "budget", "CPU ms/plan", "mean ms", "p50 ms", "p95 ms", "max ms", "DP share", "fallbacks", "at bound", "DP-only mean", "DP-only p95"];
  const body = [
    ["TAO (published)", "-", "-", ms(PUBLISHED.meanMs), "-", ms(PUBLISHED.p95Ms), "-", "-", "-", "-", "-", "-"],
    ...rows.map((r) => [
      r.budget === DEFAULT_PLANNER_SETTINGS.stateBudget ? "DP+BFD (default)" : "DP+BFD",
      String(r.budget),
      ms(r.time.cpuMeanMs),
      ms(r.time.meanMs),
      ms(r.time.p50Ms),
      ms(r.time.p95Ms),
      ms(r.time.maxMs),
      pct(r.dpShare),
      String(r.fallbacks),
      String(r.fallbacksAtBound),
      ms(r.dpTime.meanMs),
      ms(r.dpTime.p95Ms),
    ]),
    ["BFD alone", "-", ms(baseline.time.cpuMeanMs), ms(baseline.time.meanMs), ms(baseline.time.p50Ms), ms(baseline.time.p95Ms), ms(baseline.time.maxMs), "0.0 %", "-", "-", "-", "-"],
  ];
  console.log(table(header, body));
  console.log(
    `\nBFD alone vs the DP optimum on the ${baseline.compared} snapshots the DP can solve (state space <= ${exactLimit}):` +
      ` optimal on ${baseline.optimal} (${pct(baseline.optimal / Math.max(1, baseline.compared))});` +
      ` mean share of the optimum: credit ${pct(baseline.creditShare)}, ready admitted ${pct(baseline.readyShare)}, tokens ${pct(baseline.tokensShare)}.`,
  );
  console.log('"at bound": fallback plans that reached the upper bound, so were optimal anyway.');
  console.log("CPU ms/plan: process CPU time over the pass / plans; mean..max: wall-clock per plan, which includes time descheduled on a busy machine.");
}

try {
  main(process.argv.slice(2));
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exitCode = 1;
}
