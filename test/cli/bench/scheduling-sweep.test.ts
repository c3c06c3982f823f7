import { describe, expect, it } from "vitest";
import { parseSchedulingBenchArgs, type SchedulingBenchOptions } from "../../../src/cli/bench/scheduling-options.js";
import { BenchProgress } from "../../../src/cli/bench/scheduling-progress.js";
import type { Regime } from "../../../src/cli/bench/scheduling-regimes.js";
import { batchCapacity, ladderAround, planWeights, runSchedulingSweep, type Simulate } from "../../../src/cli/bench/scheduling-sweep.js";
import { firstSampleAt } from "../../../src/sim/des/observer.js";
import type { CallRecord, SimulationConfig, SimulationResult } from "../../../src/sim/des/simulate.js";
import type { BenchReport } from "../../../src/sim/report/bench-report.js";
import { generatePrograms, parseWorkload, type Workload } from "../../../src/sim/workload/index.js";

/*
 * The sweep's logic against a stand-in simulator whose behaviour is known exactly:
 * latency(rate) = 10 · (1 + (rate / knee)²) ms per token up to the policy's knee
 * (1 prog/s for fcfs-rr, 2 for agentix), where the engines are busy rate / knee of the
 * time; above the knee the run is unstable (each later program takes longer). The
 * real simulator runs in scheduling.test.ts.
 */

const N = 90;
const workload = parseWorkload({
  name: "curve",
  arrival: { process: "poisson", ratePerSec: 1 },
  programs: N,
  tenants: [{ id: "ten_a", weight: 3 }, { id: "ten_b", weight: 1 }],
  mix: [{ kind: "chat", params: { callsPerProgram: 1, newPromptTokens: 1, outputTokens: 1 } }],
});
const unitArrivals = generatePrograms(workload, { count: N });
const lastUnitArrival = unitArrivals.at(-1)?.arrivalMs as number;
const KNEE: Record<string, number> = { "fcfs-rr": 1, agentix: 2, oracle: 8 };
const latency = (policy: string, rate: number) => 10 * (1 + (rate / (KNEE[policy] as number)) ** 2);

function curveSimulator(seen: SimulationConfig[] = []): Simulate {
  return (config) => {
    seen.push(config);
    const last = config.programs.at(-1)?.arrivalMs ?? 0;
    const knee = KNEE[config.policy] as number;
    const engine = (busyMs: number, windowBusyMs: number) => ({
      engineId: "e",
      busyMs,
      prefixCacheQueries: 0,
      prefixCacheHits: 0,
      preemptions: 0,
      promptTokens: 0,
      generationTokens: 0,
      steps: 0,
      batchMs: busyMs,
      kvMs: 0,
      kvMax: 0,
      batchMax: 1,
      ...(config.window === undefined ? {} : { window: { busyMs: windowBusyMs, batchMs: windowBusyMs, kvMs: 0, kvMax: 0, batchMax: 1, steps: 1, preemptions: 0 } }),
    });
    const record = (p: SimulationConfig["programs"][number], finishMs: number) => ({
      programId: p.programId, kind: p.kind, ...(p.tenantId === undefined ? {} : { tenantId: p.tenantId }), arrivalMs: p.arrivalMs, finishMs,
      calls: 1, plannedCalls: 1, generatedTokens: 1, promptTokens: 1, cachedTokens: 0, queueMs: 0, poolQueueMs: 0, serviceMs: 1, criticalPathMs: 1, preemptions: 0,
    });
    if (last === 0) {
      // Batch: capacity estimate N programs / N s of busy time per engine = 1 prog/s.
      return {
        policy: config.policy, engines: Array.from({ length: config.engines }, () => engine(N * 1_000, 0)),
        programs: config.programs.map((p) => record(p, 100)), simEndMs: 100, wallMs: 0, events: 1, truncated: false, endedBy: "all-finished",
      } satisfies SimulationResult;
    }
    const rate = lastUnitArrival / last;
    const stable = rate <= knee + 1e-9;
    const programs = config.programs.map((p, i) => record(p, p.arrivalMs + latency(config.policy, rate) * (stable ? 1 : 1 + (3 * i) / N)));
    const window = config.window ?? { startMs: 0, endMs: last };
    const simEndMs = Math.max(...programs.map((p) => p.finishMs));
    const every = config.sampleEveryMs ?? 1_000;
    const samples = [];
    for (let t = firstSampleAt(window.startMs, every); t <= simEndMs; t += every) {
      samples.push({ atMs: t, programsInSystem: programs.filter((p) => p.arrivalMs <= t && t < p.finishMs).length, poolQueued: 0, engineRunning: 0, engineWaiting: 0, kvUsage: 0 });
    }
    const calls: CallRecord[] = programs.map((p) => ({
      programId: p.programId, callId: 0, thread: "main", readyMs: p.arrivalMs, dispatchMs: p.arrivalMs, finishMs: p.finishMs, engineId: "e", reason: "least-loaded",
      level: 0, promoted: false, startValueMs: 0, promptTokens: 1, cachedTokens: 0, outputTokens: 1, firstTokenMs: p.finishMs,
    }));
    const busyShare = Math.min(1, rate / knee);
    const spanMs = window.endMs - window.startMs;
    return {
      policy: config.policy, engines: Array.from({ length: config.engines }, () => engine(busyShare * simEndMs, busyShare * spanMs)),
      programs, simEndMs, wallMs: 0, events: 1, truncated: false, endedBy: "watched-finished", samples, calls,
    } satisfies SimulationResult;
  };
}

function sweep(argv: string[], options: { regime?: Regime; workload?: Workload; seen?: SimulationConfig[] } = {}): Promise<BenchReport> {
  const parsed = parseSchedulingBenchArgs(["--policies", "fcfs-rr,agentix", "--programs", String(N), ...argv]) as SchedulingBenchOptions;
  let now = 0;
  return runSchedulingSweep(
    parsed,
    "curve",
    options.workload ?? workload,
    { simulate: curveSimulator(options.seen), progress: new BenchProgress({ write: () => true, isTTY: false }, 0), now: () => (now += 1), createdAt: "2026-05-01T00:00:00.000Z", command: "test" },
    options.regime === undefined ? {} : { regime: options.regime },
  );
}

describe("runSchedulingSweep: steady state", async () => {
  const report = await sweep([]);
  const rates = (policy: string) => report.sweep[policy]?.map((p) => p.ratePerSec) ?? [];
  /** The highest rate a policy ran at or below its knee: what it should sustain. */
  const lastBelow = (policy: string) => Math.max(...rates(policy).filter((r) => r <= (KNEE[policy] as number)));

  it("places the ladder around a steady-state capacity estimate (a pilot run), not the batch run's", () => {
    // Pilot at half the batch's first guess (1): 0.5 prog/s, engines busy 50 % → ~1 prog/s.
    expect(report.config.capacity?.perSec).toBeGreaterThan(0.9);
    expect(report.config.capacity?.perSec).toBeLessThan(1.1);
    expect(report.config.capacity?.source).toMatch(new RegExp(`^fcfs-rr at ${lastBelow("fcfs-rr")} prog/s, its most loaded stable run`));
    expect(report.config.capacity?.source).toMatch(/the ladder was placed by the pilot's/);
    expect(report.config.ratesSource).toBe("capacity-estimate");
  });

  it("the SLO from the baseline's lowest rate", () => {
    expect(report.slo.msPerToken).toBeCloseTo(5 * latency("fcfs-rr", rates("fcfs-rr")?.[0] as number), 9);
  });

  it("stops a policy after two unstable rates", () => {
    const ladder = rates("agentix");
    expect(ladder).toHaveLength(9);
    // fcfs-rr: stable up to its knee (1), unstable at the next two rates, so it runs no higher one.
    expect(rates("fcfs-rr")).toEqual(ladder.filter((r) => r <= 1).concat(ladder.filter((r) => r > 1).slice(0, 2)));
    expect(report.notes.join(" ")).toMatch(/Unstable at 2 rates in a row, so not run at the higher rates \(prog\/s\): fcfs-rr \(/);
    // agentix: stable up to its knee, unstable past it.
    expect(report.sweep.agentix?.filter((p) => !p.metrics.stability.stable).map((p) => p.ratePerSec)).toEqual(ladder.filter((r) => r > 2));
  });

  it("doubles the rate for a policy still meeting the SLO at the ladder's top, then refines its crossing", async () => {
    const r = await sweep(["--policies", "fcfs-rr,agentix,oracle"]);
    const ladder = r.sweep["fcfs-rr"]?.map((p) => p.ratePerSec) ?? [];
    const top = Math.max(...(r.sweep.agentix?.map((p) => p.ratePerSec) ?? []));
    const oracle = r.sweep.oracle?.map((p) => p.ratePerSec) ?? [];
    const beyond = oracle.filter((x) => x > top);
    // Doubled until unstable (past 8), then the geometric midpoint of the crossing.
    expect(beyond.length).toBeGreaterThanOrEqual(3);
    expect(Math.max(...beyond)).toBeGreaterThan(8);
    const stableTop = Math.max(...(r.sweep.oracle ?? []).filter((p) => p.metrics.stability.stable).map((p) => p.ratePerSec));
    const firstMiss = Math.min(...oracle.filter((x) => x > stableTop));
    expect(firstMiss / stableTop).toBeLessThanOrEqual(Math.SQRT2 + 1e-6);
    expect(ladder.length).toBeGreaterThan(0);
  });

  it("an unstable rate is not sustained even with its mean under the SLO", () => {
    const [fcfs, agentix] = report.headline;
    // The SLO (5× ~10.6 ms) is never reached below the knee: the knee decides.
    expect(fcfs?.sustained).toEqual({ ratePerSec: lastBelow("fcfs-rr"), relation: "=" });
    expect(fcfs?.topRatePerSec).toBe(lastBelow("fcfs-rr"));
    expect(agentix?.sustained).toEqual({ ratePerSec: lastBelow("agentix"), relation: "=" });
    expect(agentix?.ratios["fcfs-rr"]).toEqual({ value: lastBelow("agentix") / lastBelow("fcfs-rr"), relation: "=" });
    const unstableUnder = report.sweep["fcfs-rr"]?.find((p) => p.ratePerSec > 1);
    expect(unstableUnder?.metrics.stability.stable).toBe(false);
    expect(unstableUnder?.metrics.overall.meanMsPerToken).toBeLessThan(report.slo.msPerToken);
    expect(report.notes.join(" ")).toMatch(/fcfs-rr: mean under the SLO but not stable/);
  });

  it("a tighter SLO binds before the knee: interpolated crossings, and equal-latency levels", async () => {
    const tight = await sweep(["--slo-factor", "1.5"]);
    const [fcfs, agentix] = tight.headline;
    // 10 (1 + r²) = 1.5 · L(lowest): just under 0.75 for fcfs-rr; ~1.5 for agentix.
    expect(fcfs?.sustained.relation).toBe("=");
    expect(fcfs?.sustained.ratePerSec).toBeGreaterThan(0.7);
    expect(fcfs?.sustained.ratePerSec).toBeLessThan(0.8);
    expect(agentix?.sustained.ratePerSec).toBeGreaterThan(1.4);
    expect(agentix?.sustained.ratePerSec).toBeLessThan(1.6);
    expect(tight.equalLatency.map((l) => l.factor)).toEqual([1.5, 2, 3, 5]);
  });

  it("results per kind and per tenant, the tenant split adding up", () => {
    expect(report.byKind.map((g) => g.group)).toEqual(["chat"]);
    expect(report.byTenant.map((g) => g.group)).toEqual(["ten_a", "ten_b"]);
    for (const points of Object.values(report.sweep)) {
      for (const p of points) {
        const parts = Object.values(p.metrics.byTenant);
        expect(parts.reduce((n, g) => n + g.programs, 0)).toBe(p.metrics.overall.programs);
      }
    }
  });

  it("the window: 20 % warm-up, 20 % cool-down", () => {
    const point = report.sweep.agentix?.[0];
    expect(point?.metrics.window).toMatchObject({ warmup: 18, measured: 54, cooldown: 18 });
  });
});

describe("tenant plan weights", () => {
  it("are equal unless the workload names them: traffic weights are not plan weights", async () => {
    const seen: SimulationConfig[] = [];
    const report = await sweep(["--rates", "0.5,1"], { seen });
    expect(report.config.planWeights).toEqual({});
    expect(seen.every((c) => JSON.stringify(c.tenantWeights) === "{}")).toBe(true);

    const withPlans = parseWorkload({ ...workload, tenants: [{ id: "ten_a", weight: 3, planWeight: 2 }, { id: "ten_b", weight: 1 }] });
    expect(planWeights(withPlans)).toEqual({ ten_a: 2 });
    const seenPlans: SimulationConfig[] = [];
    await sweep(["--rates", "0.5,1"], { workload: withPlans, seen: seenPlans });
    expect(seenPlans.every((c) => c.tenantWeights?.ten_a === 2 && c.tenantWeights?.ten_b === undefined)).toBe(true);
  });
});

describe("a regime's goals", () => {
  it("are evaluated on the report", async () => {
    const regime: Regime = {
      name: "kv",
      title: "test",
      description: "test",
      workload: "curve",
      programs: N,
      engines: 4,
      engineProfile: "llama-3.1-8b-h100",
      gapScale: 1,
      sloFactor: 5,
      rates: [0.5, 1, 2],
      policies: ["fcfs-rr", "agentix"],
      goals: [
        { kind: "ratio", policy: "agentix", reference: "fcfs-rr", atLeast: 1.5 },
        { kind: "ratio", policy: "agentix", reference: "fcfs-rr", atLeast: 4 },
        { kind: "held-share", policy: "agentix", atLeast: 0.05 },
      ],
    };
    const report = await sweep(["--rates", "0.25,0.5,1,1.5,2,2.5,3"], { regime });
    expect(report.config.regime).toBe("kv");
    expect(report.goals.map((g) => g.status)).toEqual(["PASS", "MISS", "MISS"]);
    expect(report.goals[1]?.measured).toBe("2.00×");
  });
});

describe("helpers", () => {
  it("ladderAround rounds to 3 significant digits", () => {
    expect(ladderAround(0.3183, false)).toEqual([0.0796, 0.159, 0.239, 0.318, 0.398, 0.477, 0.637]);
    expect(ladderAround(0.3183, true)).toEqual([0.0796, 0.239, 0.477]);
  });

  it("batchCapacity: finished programs per second of busy time per engine", () => {
    const run = curveSimulator()({ programs: unitArrivals.map((p) => ({ ...p, arrivalMs: 0 })), policy: "fcfs-rr", engines: 2 });
    expect(batchCapacity(run)).toBe(1);
    expect(() => batchCapacity({ ...run, programs: run.programs.map((p) => ({ ...p, finishMs: Number.NaN })) })).toThrow(/give --rates/);
  });
});
