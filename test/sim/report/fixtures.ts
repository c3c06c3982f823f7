import type { PolicyName } from "../../../src/sim/des/policies.js";
import type { RunSample } from "../../../src/sim/des/observer.js";
import type { CallRecord } from "../../../src/sim/des/simulate.js";
import type { BenchReport, SweepPoint } from "../../../src/sim/report/bench-report.js";
import { computeRunMetrics } from "../../../src/sim/report/metrics.js";
import { computeSteadyState, DEFAULT_STABILITY, programWindow } from "../../../src/sim/report/steady-state.js";
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
  return { busyMs: 0, prefixCacheQueries: 0, prefixCacheHits: 0, preemptions: 0, promptTokens: 0, generationTokens: 0, steps: 0, batchMs: 0, kvMs: 0, kvMax: 0, batchMax: 0, ...overrides };
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

/**
 * A steady-state run of 20 programs (4 warm-up, 12 measured, 4 cool-down), two
 * kinds and two tenants, one call each (held 30 ms when `held`), with a flat backlog.
 */
export function steadyPoint(rate: number, latency: (i: number) => number, options: { held?: boolean; stable?: boolean } = {}): SweepPoint {
  const n = 20;
  const programs = Array.from({ length: n }, (_, k) =>
    program({
      programId: `p${k}`,
      arrivalMs: k * 10,
      finishMs: k * 10 + latency(k + 1) * 10,
      generatedTokens: 10,
      promptTokens: 100,
      kind: k % 3 === 0 ? "tree-search" : "chat",
      tenantId: k % 2 === 0 ? "ten_a" : "ten_b",
    }),
  );
  const window = programWindow(programs, { warmupFraction: 0.2, cooldownFraction: 0.2 });
  const hold = options.held === true ? 30 : 0;
  const calls: CallRecord[] = programs.map((p) => ({
    programId: p.programId,
    callId: 0,
    thread: "main",
    readyMs: p.arrivalMs,
    dispatchMs: p.arrivalMs + hold,
    finishMs: p.finishMs,
    engineId: "e0",
    reason: "least-loaded",
    level: 0,
    promoted: false,
    startValueMs: 0,
    promptTokens: 100,
    cachedTokens: 50,
    outputTokens: 10,
    firstTokenMs: p.arrivalMs + hold + 1,
  }));
  // An unstable run: its backlog climbs across the window.
  const climb = options.stable === false ? 1 : 0;
  const samples: RunSample[] = Array.from({ length: 41 }, (_, i) => ({ atMs: i * 5, programsInSystem: 3 + climb * i, poolQueued: 0, engineRunning: 1, engineWaiting: 0, kvUsage: 0.1 }));
  const metrics = computeSteadyState(
    {
      programs,
      engines: [engine({ engineId: "e0", window: { busyMs: 60, batchMs: 240, kvMs: 30, kvMax: 0.5, batchMax: 6, steps: 10, preemptions: 1 } })],
      simEndMs: 2_000,
      wallMs: 12,
      events: 345,
      endedBy: "watched-finished",
      samples,
      calls,
    },
    { window, plannedOutputTokens: new Map(programs.map((p) => [p.programId, 10])), workTokens: new Map(programs.map((p, k) => [p.programId, k])) },
  );
  return { ratePerSec: rate, metrics, samples };
}

/** A small but complete report over the given policies (figures are illustrative only). */
export function sampleReport(policies: string[]): BenchReport {
  const rates = [0.5, 1, 2];
  const sweep: Record<string, SweepPoint[]> = {};
  policies.forEach((policy, index) => {
    sweep[policy] = rates.map((rate) => steadyPoint(rate, (i) => (i + index) * rate * rate, { held: policy === "agentix", stable: rate < 2 }));
  });
  const batchRun = computeRunMetrics(runAt("plas", 20, (i) => i));
  const references = policies.slice(0, 1);
  const exact = (ratePerSec: number) => ({ ratePerSec, relation: "=" as const });
  const report: BenchReport = {
    format: "agentix-scheduling-bench/2",
    createdAt: "2026-05-01T00:00:00.000Z",
    config: {
      regime: null,
      workload: "mixed",
      workloadName: "mixed <&> test",
      programsPerRun: 20,
      window: { warmupFraction: 0.2, cooldownFraction: 0.2 },
      stability: { ...DEFAULT_STABILITY },
      drain: { windows: 1, minMs: 5_000 },
      engines: 2,
      engineProfile: "llama-3.1-8b-h100",
      maxInFlightPerEngine: 4,
      gapScale: 1,
      seed: 1,
      planWeights: {},
      policies,
      rates,
      ratesSource: "user",
      capacity: null,
      quick: true,
      command: "agentix bench --quick",
    },
    policies: policies.map((p) => ({ name: p, label: `${p} label`, description: `what ${p} does` })),
    baseline: policies[0] ?? "fcfs-rr",
    references,
    slo: { msPerToken: 40, source: "user", explanation: "given with --slo-ms-per-token" },
    sweep,
    headline: policies.map((p, i) => ({
      policy: p,
      sustained: exact(1 + i / 10),
      topRatePerSec: 1,
      ratios: Object.fromEntries(references.map((r) => [r, { value: 1 + i / 10, relation: "=" as const }])),
    })),
    equalLatency: [2, 3].map((factor) => ({
      factor,
      msPerToken: 10 * factor,
      perPolicy: policies.map((p, i) => ({ policy: p, sustained: exact(factor / 2 + i / 10), ratios: Object.fromEntries(references.map((r) => [r, { value: 1 + i / 10, relation: "=" as const }])) })),
    })),
    byKind: ["chat", "tree-search"].map((group) => ({ group, sloMsPerToken: 40, perPolicy: policies.map((p) => ({ policy: p, sustained: exact(1), ratio: { value: 1, relation: "=" as const } })) })),
    byTenant: ["ten_a", "ten_b"].map((group) => ({ group, sloMsPerToken: 40, perPolicy: policies.map((p) => ({ policy: p, sustained: exact(1), ratio: { value: 1, relation: "=" as const } })) })),
    compareAt: { ratePerSec: 1, why: "test load" },
    cdf: {
      ratePerSec: 1,
      series: policies.map((p, i) => ({ policy: p, quantiles: [0, 0.5, 1].map((q) => ({ q, value: (1 + q) * (i + 1) })) })),
    },
    batch: policies.map((p, i) => ({ policy: p, makespanMs: i === 1 ? null : 1000 * (i + 1), metrics: batchRun })),
    goals: [],
    paper: null,
    notes: ["a caveat <with markup>"],
    wallMs: 1234,
  };
  return report;
}
