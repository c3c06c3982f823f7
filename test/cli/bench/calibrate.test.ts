import { describe, expect, it } from "vitest";
import { DEFAULT_CAPACITY_OPTIONS, probeRate } from "../../../src/cli/bench/calibrate-capacity.js";
import { measureDecodeStepMs, measureKvCapacityTokens, measurePrefillTokensPerSec } from "../../../src/cli/bench/calibrate-engine.js";
import { parseCalibrateArgs } from "../../../src/cli/bench/calibrate.js";
import { loadWorkload } from "../../../src/sim/workload/load.js";

const PROFILE = "llama-3.1-8b-h100" as const;

describe("engine calibration measures", () => {
  it("a decode step matches the reference formula written out (7 ms + 4.4 µs·B + 0.076 µs·ΣC)", () => {
    expect(measureDecodeStepMs(PROFILE, 1, 2_048)).toBeCloseTo(7 + 4.4e-3 + 0.076e-3 * 2_048, 9);
    expect(measureDecodeStepMs(PROFILE, 64, 2_048)).toBeCloseTo(7 + 4.4e-3 * 64 + 0.076e-3 * 64 * 2_048, 9);
  });

  it("prefill of a 2k prompt is one step: max(7, 29 µs · 2,049) + attention + context + sequence terms", () => {
    const { ttftMs, steps } = measurePrefillTokensPerSec(PROFILE, 2_048);
    expect(steps).toBe(1);
    expect(ttftMs).toBeCloseTo(0.029 * 2_049 + 1.18e-6 * 2_048 * 1_024 + 0.076e-3 * 2_048 + 4.4e-3, 9);
    expect(measurePrefillTokensPerSec(PROFILE, 8_192).steps).toBe(4);
  });

  it("KV capacity is the profile's 26,300 blocks of 16 tokens", () => {
    expect(measureKvCapacityTokens(PROFILE)).toBe(26_300 * 16);
  });
});

describe("capacity probe", () => {
  it("tells a light load from an overload", async () => {
    const workload = await loadWorkload("tree-search");
    const options = { ...DEFAULT_CAPACITY_OPTIONS, policy: "fcfs-rr" as const, engineProfile: PROFILE, windowMs: 9 * 60_000, drainMs: 6 * 60_000 };
    const light = probeRate(workload, 0.05, options);
    expect(light.sustained).toBe(true);
    expect(light.unfinished).toBe(0);
    expect(light.lastThirdMsPerToken).toBeLessThan(10);
    const overload = probeRate(workload, 0.3, { ...options, policy: "agentix" });
    expect(overload.sustained).toBe(false);
  });
});

describe("parseCalibrateArgs", () => {
  it("reads options and rejects bad ones", () => {
    expect(parseCalibrateArgs(["--seed", "3", "--window-min", "10", "--policies", "plas,agentix", "--buffer", "64", "--speed"])).toEqual({
      profile: "llama-3.1-8b-h100",
      seed: 3,
      windowMs: 600_000,
      policies: ["plas", "agentix"],
      buffer: 64,
      speed: true,
    });
    expect(parseCalibrateArgs(["-h"])).toBe("help");
    expect(() => parseCalibrateArgs(["--policies", "lifo"])).toThrow(/unknown policy/);
    expect(() => parseCalibrateArgs(["--window-min", "1"])).toThrow(/window-min/);
    expect(() => parseCalibrateArgs(["--profile", "gpt-9"])).toThrow(/profile/);
    expect(() => parseCalibrateArgs(["--bogus"])).toThrow();
  });
});
