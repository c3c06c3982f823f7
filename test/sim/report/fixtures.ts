import type { PolicyName } from "../../../src/sim/des/policies.js";
import type { BenchReport, SweepPoint } from "../../../src/sim/report/bench-report.js";
import { computeRunMetrics } from "../../../src/sim/report/metrics.js";
import type { EngineRecord, ProgramRecord, RunResult } from "../../../src/sim/report/run-result.js";

/* Hand-made simulator results and reports for the report's unit tests. */

export function program(overrides: Partial<ProgramRecord> & Pick<ProgramRecord, "programId" | "arrivalMs" | "finishMs">): ProgramRecord {
  return {
    kind: "chat",
    calls: 1,
    plannedCalls: 1,
    poolQueueMs: 0,
    generatedTokens: 1,
    promptTokens: 0,
    cachedTokens: 0,
    queueMs: 0,
    serviceMs: 0,
    criticalPathMs: 0,
    preemptions: 0,
    ...overrides,
  };
}

export function engine(overrides: Partial<EngineRecord> & Pick<EngineRecord, "engineId">): EngineRecord {
  return { busyMs: 0, prefixCacheQueries: 0, prefixCacheHits: 0, preemptions: 0, promptTokens: 0, generationTokens: 0, steps: 0, ...overrides };
}

export function result(programs: ProgramRecord[], engines: EngineRecord[], simEndMs: number, policy: PolicyName = "fcfs-rr"): RunResult {
  return { policy, engines, programs, simEndMs, wallMs: 12, events: 345, truncated: false };
}

/**
 * Four programs, one unfinished, two engines. Hand-computed figures:
 *   normalised latency (ms/token): A 1000/100 = 10, B 2000/50 = 40, C 600/200 = 3
 *   completion (ms): 1000, 2000, 600
 *   D (unfinished) has the most tokens (5,010): the longest 10 % = {D}, lower bound 4000 − 1500 = 2500
 *   span 4000 ms: 3 programs / 4 s = 0.75/s; 360 tokens / 4 s = 90/s
 *   cache: (600 + 200) / (1000 + 1000) = 0.4; preemptions 2 + 1 = 3; busy (3000 + 1000) / (2 × 4000) = 0.5
 *   queue mean over finished: (100 + 300 + 50) / 3 = 150
 */
export function fourPrograms(): RunResult {
  return result(
    [
      program({ programId: "A", arrivalMs: 0, finishMs: 1000, generatedTokens: 100, promptTokens: 400, queueMs: 100 }),
      program({ programId: "B", arrivalMs: 500, finishMs: 2500, generatedTokens: 50, promptTokens: 150, queueMs: 300 }),
      program({ programId: "C", arrivalMs: 1000, finishMs: 1600, generatedTokens: 200, promptTokens: 1800, queueMs: 50 }),
      program({ programId: "D", arrivalMs: 1500, finishMs: Number.NaN, generatedTokens: 10, promptTokens: 5000, queueMs: 999 }),
    ],
    [
      engine({ engineId: "e0", busyMs: 3000, prefixCacheQueries: 1000, prefixCacheHits: 600, preemptions: 2 }),
      engine({ engineId: "e1", busyMs: 1000, prefixCacheQueries: 1000, prefixCacheHits: 200, preemptions: 1 }),
    ],
    4000,
  );
}

/** A run whose programs have normalised latency `f(rate, i)` for i = 1..n. */
function runAt(policy: PolicyName, n: number, latency: (i: number) => number): RunResult {
  const programs = Array.from({ length: n }, (_, k) =>
    program({ programId: `p${k}`, arrivalMs: k * 10, finishMs: k * 10 + latency(k + 1) * 10, generatedTokens: 10, promptTokens: 100 }),
  );
  return result(programs, [engine({ engineId: "e0", busyMs: 100, prefixCacheQueries: 10, prefixCacheHits: 5 })], n * 10 + 1000, policy);
}

/** A small but complete report over the given policies (figures are illustrative only). */
export function sampleReport(policies: string[]): BenchReport {
  const rates = [0.5, 1, 2];
  const sweep: Record<string, SweepPoint[]> = {};
  policies.forEach((policy, index) => {
    sweep[policy] = rates.map((rate) => ({
      ratePerSec: rate,
      metrics: computeRunMetrics(runAt("plas", 20, (i) => (i + index) * rate * rate)),
    }));
  });
  const batchRun = computeRunMetrics(runAt("plas", 20, (i) => i));
  return {
    format: "agentix-scheduling-bench/1",
    createdAt: "2026-05-01T00:00:00.000Z",
    config: {
      workload: "mixed",
      workloadName: "mixed <&> test",
      programsPerRun: 20,
      engines: 2,
      engineProfile: "llama-3.1-8b-h100",
      maxInFlightPerEngine: 4,
      gapScale: 1,
      seed: 1,
      policies,
      rates,
      ratesSource: "user",
      capacityEstimatePerSec: null,
      maxSimMs: 3_600_000,
      quick: true,
      command: "agentix bench --quick",
    },
    policies: policies.map((p) => ({ name: p, label: `${p} label`, description: `what ${p} does` })),
    baseline: policies[0] ?? "fcfs-rr",
    slo: { msPerToken: 40, source: "user", explanation: "given with --slo-ms-per-token" },
    sweep,
    headline: policies.map((p, i) => ({ policy: p, sustained: { ratePerSec: 1 + i / 10, relation: "=" }, ratio: { value: 1 + i / 10, relation: "=" } })),
    cdf: {
      ratePerSec: 1,
      why: "test load",
      series: policies.map((p, i) => ({ policy: p, quantiles: [0, 0.5, 1].map((q) => ({ q, value: (1 + q) * (i + 1) })) })),
    },
    batch: policies.map((p, i) => ({ policy: p, makespanMs: i === 1 ? null : 1000 * (i + 1), metrics: batchRun })),
    notes: ["a caveat <with markup>"],
    wallMs: 1234,
  };
}
