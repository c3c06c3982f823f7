import { describe, expect, it } from "vitest";
import { parseSchedulingBenchArgs, type SchedulingBenchOptions } from "../../../src/cli/bench/scheduling-options.js";
import { BenchProgress } from "../../../src/cli/bench/scheduling-progress.js";
import { batchCapacity, ladderAround, runSchedulingSweep, type Simulate } from "../../../src/cli/bench/scheduling-sweep.js";
import type { SimulationResult } from "../../../src/sim/des/simulate.js";
import { generatePrograms, parseWorkload } from "../../../src/sim/workload/index.js";

/*
 * The adaptive ladder's logic against a stand-in simulator whose latency curve is
 * known exactly: latency(rate) = 10 · (1 + (rate / knee)²) ms per token, knee 1 prog/s
 * for fcfs-rr and 2 for agentix. (The real simulator runs in scheduling.test.ts.)
 */

const workload = parseWorkload({ name: "curve", arrival: { process: "poisson", ratePerSec: 1 }, programs: 20, mix: [{ kind: "chat" }] });
const unitArrivals = generatePrograms(workload, { count: 20 });
const lastUnitArrival = unitArrivals.at(-1)?.arrivalMs as number;
const KNEE: Record<string, number> = { "fcfs-rr": 1, agentix: 2 };
const latency = (policy: string, rate: number) => 10 * (1 + (rate / (KNEE[policy] as number)) ** 2);

const curveSimulator: Simulate = (config) => {
  const last = config.programs.at(-1)?.arrivalMs ?? 0;
  const rate = last === 0 ? 1_000 : lastUnitArrival / last;
  const ms = latency(config.policy, rate);
  return {
    policy: config.policy,
    // Capacity estimate: 20 programs / 20 s of busy time per engine = 1 prog/s.
    engines: Array.from({ length: config.engines }, (_, i) => ({ engineId: `e${i}`, busyMs: 20_000, prefixCacheQueries: 0, prefixCacheHits: 0, preemptions: 0, promptTokens: 0, generationTokens: 0, steps: 0 })),
    programs: config.programs.map((p) => ({
      programId: p.programId, kind: p.kind, arrivalMs: p.arrivalMs, finishMs: p.arrivalMs + ms, calls: 1, plannedCalls: 1,
      generatedTokens: 1, promptTokens: 1, cachedTokens: 0, queueMs: 0, poolQueueMs: 0, serviceMs: ms, criticalPathMs: ms, preemptions: 0,
    })),
    simEndMs: last + ms, wallMs: 0, events: 1, truncated: false,
  } satisfies SimulationResult;
};

function sweep(argv: string[]) {
  const options = parseSchedulingBenchArgs(["--policies", "fcfs-rr,agentix", ...argv]) as SchedulingBenchOptions;
  let now = 0;
  return runSchedulingSweep(options, "curve", workload, {
    simulate: curveSimulator,
    progress: new BenchProgress({ write: () => true, isTTY: false }, 0),
    now: () => (now += 1),
    createdAt: "2026-05-01T00:00:00.000Z",
    command: "test",
  });
}

describe("runSchedulingSweep: the adaptive ladder", () => {
  const report = sweep([]);
  const rates = (policy: string) => report.sweep[policy]?.map((p) => p.ratePerSec);

  it("builds the ladder around the capacity estimate and the SLO from the baseline's lowest rate", () => {
    expect(report.config.capacityEstimatePerSec).toBe(1);
    expect(report.slo.msPerToken).toBeCloseTo(5 * latency("fcfs-rr", 0.125), 10);
    expect(report.slo.explanation).toBe("5× fcfs-rr's mean at the lowest rate, 0.125 prog/s");
  });

  it("doubles past the ladder until the SLO is missed, then runs the crossing's midpoint", () => {
    // fcfs-rr meets the SLO at 2 (50 ≤ 50.8 ms/token), misses at 4; midpoint 2.83 also misses.
    expect(rates("fcfs-rr")).toEqual([0.125, 0.25, 0.5, 1, 2, 2.83, 4]);
    // agentix runs the baseline's whole ladder (4 included), then doubles to 8 and refines at 5.66.
    expect(rates("agentix")).toEqual([0.125, 0.25, 0.5, 1, 2, 4, 5.66, 8]);
    expect(report.config.rates).toEqual([0.125, 0.25, 0.5, 1, 2, 2.83, 4, 5.66, 8]);
  });

  it("the headline: crossings near the true ones (2.02 and 4.04 prog/s), ratio ≈ 2", () => {
    const [fcfs, agentix] = report.headline;
    expect(fcfs?.sustained.relation).toBe("=");
    expect(fcfs?.sustained.ratePerSec).toBeGreaterThan(2);
    expect(fcfs?.sustained.ratePerSec).toBeLessThan(2.1);
    expect(agentix?.sustained.ratePerSec).toBeGreaterThan(4);
    expect(agentix?.sustained.ratePerSec).toBeLessThan(4.2);
    expect(agentix?.ratio?.relation).toBe("=");
    expect(agentix?.ratio?.value).toBeCloseTo(2, 1);
    expect(report.notes).toEqual([]);
    // Distributions are compared where fcfs-rr last meets the SLO.
    expect(report.cdf.ratePerSec).toBe(2);
  });

  it("when the baseline last meets the SLO at its own midpoint, every policy runs that rate for the CDF", () => {
    // SLO ≈ 122 ms/token: fcfs-rr meets it at 2 and at the midpoint 2.83 (90), misses at 4 (170).
    const r = sweep(["--slo-factor", "12"]);
    expect(r.cdf.ratePerSec).toBe(2.83);
    expect(r.sweep.agentix?.map((p) => p.ratePerSec)).toContain(2.83);
    expect(r.cdf.series.map((s) => s.quantiles.length)).toEqual([101, 101]);
  });

  it("--quick: a shorter ladder and no midpoints", () => {
    const quick = sweep(["--quick"]);
    expect(quick.sweep["fcfs-rr"]?.map((p) => p.ratePerSec)).toEqual([0.125, 0.5, 2, 4]);
  });

  it("--slo-factor", () => {
    const loose = sweep(["--slo-factor", "20"]);
    expect(loose.slo.msPerToken).toBeCloseTo(20 * latency("fcfs-rr", 0.125), 10);
    expect(loose.slo.explanation).toMatch(/^20× fcfs-rr's mean/);
  });
});

describe("helpers", () => {
  it("ladderAround rounds to 3 significant digits", () => {
    expect(ladderAround(0.3183, false)).toEqual([0.0398, 0.0796, 0.159, 0.318, 0.637]);
    expect(ladderAround(0.3183, true)).toEqual([0.0398, 0.159, 0.637]);
  });

  it("batchCapacity: finished programs per second of busy time per engine", () => {
    const run = curveSimulator({ programs: unitArrivals.map((p) => ({ ...p, arrivalMs: 0 })), policy: "fcfs-rr", engines: 2 });
    expect(batchCapacity(run)).toBe(1);
    expect(() => batchCapacity({ ...run, programs: run.programs.map((p) => ({ ...p, finishMs: Number.NaN })) })).toThrow(/give --rates/);
  });
});
