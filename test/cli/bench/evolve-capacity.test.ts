import { describe, expect, it } from "vitest";
import { type CapacityTrial, capacityTrial, formatCapacityReport, sustainedRate } from "../../../src/cli/bench/evolve-capacity.js";

/* Issue 13: throughput after the shift, as the highest computer-use rate a policy sustains. */

const verdict = (computerUsePerSec: number, sustained: boolean): CapacityTrial => ({
  computerUsePerSec,
  sustained,
  calls: 100,
  p95TtftMs: sustained ? 500 : 9_000,
  unfinishedPrograms: sustained ? 0 : 3,
  switches: 0,
  prefillEnginesAtEnd: 4,
});

describe("sustainedRate", () => {
  it("bisects to the highest rate sustained, within the resolution, asking each rate once", () => {
    const asked: number[] = [];
    const found = sustainedRate((r) => (asked.push(r), verdict(r, r <= 3.3)), 1, 8, 0.125);
    expect(found.sustainedPerSec).toBeLessThanOrEqual(3.3);
    expect(found.sustainedPerSec).toBeGreaterThan(3.3 - 0.125);
    expect(found.atCeiling).toBe(false);
    expect(new Set(asked).size).toBe(asked.length);
    expect(found.trials).toHaveLength(asked.length);
  });

  it("says when not even the lowest rate, or the highest too, is sustained", () => {
    expect(sustainedRate((r) => verdict(r, false), 1, 8).sustainedPerSec).toBeUndefined();
    const all = sustainedRate((r) => verdict(r, true), 1, 8);
    expect(all).toMatchObject({ sustainedPerSec: 8, atCeiling: true });
    expect(all.trials).toHaveLength(2);
  });
});

describe("capacityTrial", () => {
  const options = { engines: 2, rate: 0.1, phaseSeconds: 40, seed: 3 };

  it("sustains a light computer-use load after math and not one far past the pool (a queue that grows: TTFT over the target, programs left)", () => {
    const light = capacityTrial({ kind: "mixed" }, 0.2, options);
    expect(light.sustained).toBe(true);
    expect(light.calls).toBeGreaterThan(0);
    expect(light.p95TtftMs).toBeLessThanOrEqual(2_000);
    const heavy = capacityTrial({ kind: "mixed" }, 6, options);
    expect(heavy.sustained).toBe(false);
    expect(heavy.p95TtftMs > 2_000 || heavy.unfinishedPrograms > 0).toBe(true);
  });

  it("reports the ratio controller's split at the end, and the report names the best fixed split", () => {
    const trial = capacityTrial({ kind: "ratio", prefillEngines: 1 }, 0.3, { ...options, engines: 4 });
    expect(trial.prefillEnginesAtEnd).toBeGreaterThanOrEqual(1);
    expect(trial.prefillEnginesAtEnd).toBeLessThanOrEqual(3);
    const rows = [
      { policy: "mixed", sustainedPerSec: 3, atCeiling: false, trials: [verdict(3, true), verdict(3.5, false)] },
      { policy: "fixed 1:3", sustainedPerSec: undefined, atCeiling: false, trials: [verdict(1, false)] },
      { policy: "fixed 2:2", sustainedPerSec: 2.5, atCeiling: false, trials: [verdict(2.5, true)] },
      { policy: "fixed 3:1", sustainedPerSec: 3.5, atCeiling: false, trials: [verdict(3.5, true)] },
      { policy: "agentix ratio (from 1:3)", sustainedPerSec: 4.2, atCeiling: false, trials: [verdict(4.2, true)] },
    ];
    const report = formatCapacityReport(rows, { engines: 4, rate: 0.5, phaseSeconds: 240, seed: 7 });
    expect(report).toContain("best fixed split for this phase (fixed 3:1): 1.20×");
    expect(report).toMatch(/\| fixed 1:3 \| < 1 \|/);
  });
});
