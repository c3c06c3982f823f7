import { describe, expect, it } from "vitest";
import { BenchUsageError, DEFAULTS, parseSchedulingBenchArgs, type SchedulingBenchOptions } from "../../../src/cli/bench/scheduling-options.js";
import { programsPerRun } from "../../../src/cli/bench/scheduling-sweep.js";
import { loadWorkload } from "../../../src/sim/workload/load.js";
import { POLICY_NAMES, POOL_DEFAULT_MAX_IN_FLIGHT } from "../../../src/sim/des/policies.js";

function usageError(argv: string[]): string {
  try {
    parseSchedulingBenchArgs(argv);
  } catch (error) {
    expect(error).toBeInstanceOf(BenchUsageError);
    return (error as Error).message;
  }
  throw new Error(`expected ${argv.join(" ")} to be rejected`);
}

describe("parseSchedulingBenchArgs", () => {
  it("defaults", () => {
    const o = parseSchedulingBenchArgs([]);
    expect(o).toEqual({
      regime: undefined,
      regimeOverrides: [],
      ratesFromRegime: false,
      workload: "mixed",
      policies: [...POLICY_NAMES],
      rates: undefined,
      programs: undefined,
      engines: 4,
      engineProfile: "llama-3.1-8b-h100",
      seed: undefined,
      sloMsPerToken: undefined,
      sloFactor: 5,
      outDir: "bench-results",
      maxInFlightPerEngine: undefined,
      gapScale: 1,
      maxSimMs: DEFAULTS.maxSimHours * 3_600_000,
      warmupFraction: 0.2,
      cooldownFraction: 0.2,
      drainWindows: 1,
      batch: false,
      jobs: 1,
      quick: false,
    });
    expect(POOL_DEFAULT_MAX_IN_FLIGHT).toBeGreaterThan(0);
  });

  it("reads every flag", () => {
    const o = parseSchedulingBenchArgs([
      "--workload", "./my.json",
      "--policies", "agentix, fcfs-rr,agentix",
      "--rates", "2,0.5,1,2",
      "--programs", "50",
      "--engines", "2",
      "--engine-profile", "llama-3.1-70b-h100-tp4",
      "--seed", "7",
      "--slo-ms-per-token", "12.5",
      "--max-in-flight", "32",
      "--gap-scale", "0",
      "--max-sim-hours", "0.5",
      "--warmup", "0.25",
      "--cooldown", "0.1",
      "--drain-windows", "2",
      "--batch",
      "--jobs", "2",
      "--out", "out/dir",
    ]);
    expect(o).toMatchObject({
      workload: "./my.json",
      // canonical order, no duplicates
      policies: ["fcfs-rr", "agentix"],
      rates: [0.5, 1, 2],
      programs: 50,
      engines: 2,
      engineProfile: "llama-3.1-70b-h100-tp4",
      seed: 7,
      sloMsPerToken: 12.5,
      maxInFlightPerEngine: 32,
      gapScale: 0,
      maxSimMs: 1_800_000,
      warmupFraction: 0.25,
      cooldownFraction: 0.1,
      drainWindows: 2,
      batch: true,
      jobs: 2,
      outDir: "out/dir",
    });
  });

  it("--regime sets the regime's workload, engines, profile, tool time, SLO factor, rates and policies", () => {
    expect(parseSchedulingBenchArgs(["--regime", "compute"])).toMatchObject({
      regime: "compute",
      regimeOverrides: [],
      ratesFromRegime: true,
      workload: "mixed",
      programs: 500,
      engines: 4,
      engineProfile: "llama-3.1-8b-h100",
      gapScale: 0,
      sloFactor: 3,
      policies: [...POLICY_NAMES],
    });
    expect(parseSchedulingBenchArgs(["--regime", "kv"])).toMatchObject({ workload: "long-context-coding", engines: 4, gapScale: 1 });
    expect(parseSchedulingBenchArgs(["--regime", "autellix"])).toMatchObject({ workload: "autellix", engines: 1, engineProfile: "llama-3.1-8b-a100", gapScale: 0 });
  });

  it("flags given with --regime override it, and are listed", () => {
    const o = parseSchedulingBenchArgs(["--regime", "kv", "--programs", "60", "--rates", "0.01,0.02"]);
    expect(o).toMatchObject({ programs: 60, rates: [0.01, 0.02], ratesFromRegime: false, workload: "long-context-coding", regimeOverrides: ["--rates", "--programs"] });
  });

  it("the holding regimes set admission's step-time target; --step-target-factor and --service are the queueing policies' admission and service", () => {
    expect(parseSchedulingBenchArgs(["--regime", "churn"])).toMatchObject({ workload: "tenant-churn", engines: 1, stepTargetFactor: 1.3, regimeOverrides: [] });
    expect(parseSchedulingBenchArgs(["--regime", "starvation", "--step-target-factor", "2"])).toMatchObject({ workload: "autellix", stepTargetFactor: 2, regimeOverrides: ["--step-target-factor"] });
    expect(parseSchedulingBenchArgs([])).toMatchObject({ stepTargetFactor: undefined, service: undefined });
    expect(parseSchedulingBenchArgs(["--service", "wall"])?.service).toBe("wall");
    expect(() => parseSchedulingBenchArgs(["--service", "cpu"])).toThrow(/--service: must be one of work, wall/);
    expect(() => parseSchedulingBenchArgs(["--step-target-factor", "0.5"])).toThrow(/--step-target-factor: must be >= 1/);
  });

  it("accepts the placement policies too", () => {
    expect(parseSchedulingBenchArgs(["--policies", "agentix-tao,fcfs-rr,cache-aware"])?.policies).toEqual(["fcfs-rr", "cache-aware", "agentix-tao"]);
  });

  it("--slo-factor", () => {
    expect(parseSchedulingBenchArgs(["--slo-factor", "2.5"])).toMatchObject({ sloFactor: 2.5, sloMsPerToken: undefined });
  });

  it("programs per run: the flag, else the workload's count capped at the default (smaller with --quick)", async () => {
    const mixed = await loadWorkload("mixed"); // 1,000 programs
    const small = { ...mixed, programs: { count: 16 } };
    const byDuration = { ...mixed, programs: { durationSec: 60 } };
    const options = (argv: string[]) => parseSchedulingBenchArgs(argv) as SchedulingBenchOptions;
    expect(programsPerRun(options([]), mixed)).toBe(DEFAULTS.programs);
    expect(programsPerRun(options(["--quick"]), mixed)).toBe(DEFAULTS.quickPrograms);
    expect(programsPerRun(options([]), small)).toBe(16);
    expect(programsPerRun(options([]), byDuration)).toBe(DEFAULTS.programs);
    expect(programsPerRun(options(["--quick", "--programs", "900"]), small)).toBe(900);
  });

  it("--help returns nothing to run", () => {
    expect(parseSchedulingBenchArgs(["--help"])).toBeUndefined();
    expect(parseSchedulingBenchArgs(["-h"])).toBeUndefined();
  });

  it("names the flag of every bad value", () => {
    expect(usageError(["--policies", "agentix,fifo"])).toMatch(/--policies: unknown policy "fifo" \(known: fcfs-rr, /);
    expect(usageError(["--policies", " , "])).toMatch(/--policies: needs at least one policy/);
    expect(usageError(["--rates", "0.5,abc"])).toMatch(/--rates: "abc" is not a positive number/);
    expect(usageError(["--rates=-1"])).toMatch(/--rates: "-1" is not a positive number/);
    expect(usageError(["--programs", "0"])).toMatch(/--programs: must be between 1 and/);
    expect(usageError(["--programs", "1.5"])).toMatch(/--programs: must be a whole number/);
    expect(usageError(["--engines", "four"])).toMatch(/--engines: must be a whole number/);
    expect(usageError(["--engine-profile", "gpt-9"])).toMatch(/--engine-profile: must be one of llama-3.1-8b-h100/);
    expect(usageError(["--seed=-3"])).toMatch(/--seed: must be a whole number/);
    expect(usageError(["--slo-ms-per-token", "0"])).toMatch(/--slo-ms-per-token: must be a positive number/);
    expect(usageError(["--slo-factor", "1"])).toMatch(/--slo-factor: must be > 1/);
    expect(usageError(["--slo-factor", "3", "--slo-ms-per-token", "9"])).toMatch(/exclude each other/);
    expect(usageError(["--gap-scale=-1"])).toMatch(/--gap-scale: must be a number ≥ 0/);
    expect(usageError(["--max-in-flight", "0"])).toMatch(/--max-in-flight: must be between 1 and/);
    expect(usageError(["--out", " "])).toMatch(/--out: needs a directory/);
    expect(usageError(["--regime", "gpu"])).toMatch(/--regime: must be one of compute, kv, autellix/);
    expect(usageError(["--warmup", "0.6"])).toMatch(/--warmup: must be a number in \[0, 0.5\)/);
    expect(usageError(["--warmup", "0.45", "--cooldown", "0.45"])).toMatch(/leave at least 10 %/);
  });

  it("reports every problem at once", () => {
    const message = usageError(["--programs", "x", "--engines", "0"]);
    expect(message).toMatch(/--programs/);
    expect(message).toMatch(/--engines/);
  });

  it("rejects unknown flags and stray arguments with the usage", () => {
    expect(usageError(["--polices", "plas"])).toMatch(/Unknown option '--polices'[\s\S]*agentix bench \[options\]/);
    expect(usageError(["mixed"])).toMatch(/Unexpected argument 'mixed'/);
    expect(usageError(["--rates"])).toMatch(/--rates/);
  });
});
