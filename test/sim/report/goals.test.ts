import { describe, expect, it } from "vitest";
import type { BenchReport } from "../../../src/sim/report/bench-report.js";
import { evaluateGoal } from "../../../src/sim/report/goals.js";
import type { Relation } from "../../../src/sim/report/headline.js";
import { sampleReport, steadyPoint } from "./fixtures.js";

/* The goals table: PASS and MISS follow the measured figure, n/a only when the run cannot say. */

function withRatio(value: number, relation: Relation): BenchReport {
  const report = sampleReport(["fcfs-rr", "agentix", "oracle"]);
  const agentix = report.headline.find((h) => h.policy === "agentix");
  if (agentix === undefined) throw new Error("fixture");
  agentix.ratios["fcfs-rr"] = { value, relation };
  return report;
}

describe("ratio goals", () => {
  const goal = { kind: "ratio", policy: "agentix", reference: "fcfs-rr", atLeast: 4 } as const;

  it("PASS at or above the target, MISS below it", () => {
    expect(evaluateGoal(withRatio(4.2, "="), goal)).toMatchObject({ status: "PASS", measured: "4.20×" });
    expect(evaluateGoal(withRatio(4, "="), goal).status).toBe("PASS");
    expect(evaluateGoal(withRatio(3.99, "="), goal)).toMatchObject({ status: "MISS", measured: "3.99×" });
  });

  it("a MISS says whether ordering was engaged", () => {
    // The fixture's agentix holds every call: ordering engaged.
    expect(evaluateGoal(withRatio(3, "="), goal).note).toMatch(/^ordering was engaged \(the pool held 100.0 % of agentix's calls/);
    const idle = withRatio(3, "=");
    idle.sweep.agentix = idle.sweep["fcfs-rr"] ?? [];
    expect(evaluateGoal(idle, goal).note).toMatch(/^ordering was not engaged: the pool held 0.0 % .* so whatever agentix gains comes from placement \(cache hit 50.0 % vs fcfs-rr's 50.0 % at 1\/s\)/);
    expect(evaluateGoal(withRatio(4.2, "="), goal).note).toBeNull();
  });

  it("a bound decides only on its own side", () => {
    expect(evaluateGoal(withRatio(5, ">="), goal).status).toBe("PASS");
    expect(evaluateGoal(withRatio(3, "<="), goal).status).toBe("MISS");
    const unknown = evaluateGoal(withRatio(3, ">="), goal);
    expect(unknown.status).toBe("n/a");
    expect(unknown.note).toMatch(/only known as ≥ 3.00×/);
    expect(evaluateGoal(withRatio(5, "<="), goal).status).toBe("n/a");
  });

  it("no worse than before, within the tolerance", () => {
    const before = { kind: "ratio-no-worse", policy: "agentix", reference: "fcfs-rr", before: 1.5, tolerance: 0.03, measuredOn: "core at abc" } as const;
    expect(evaluateGoal(withRatio(1.46, "="), before).status).toBe("PASS");
    expect(evaluateGoal(withRatio(1.45, "="), before).status).toBe("MISS");
    expect(evaluateGoal(withRatio(1.45, "="), before).target).toBe("≥ 1.46× (3 % tolerance)");
  });

  it("n/a when a policy did not run", () => {
    expect(evaluateGoal(withRatio(5, "="), { ...goal, reference: "fcfs-least-loaded" }).status).toBe("n/a");
  });
});

describe("oracle latency", () => {
  const goal = { kind: "oracle-latency", policy: "agentix", oracle: "oracle", atMost: 1.25 } as const;
  const report = (agentixFactor: number, unstableAt?: number): BenchReport => {
    const r = sampleReport(["fcfs-rr", "agentix", "oracle"]);
    r.sweep.oracle = [0.5, 1, 2].map((rate) => steadyPoint(rate, () => 10, { stable: rate !== unstableAt }));
    r.sweep.agentix = [0.5, 1, 2].map((rate) => steadyPoint(rate, () => (rate === 1 ? 10 * agentixFactor : 10), { stable: rate !== unstableAt }));
    return r;
  };

  it("the worst ratio over the rates both run stably", () => {
    expect(evaluateGoal(report(1.2), goal)).toMatchObject({ status: "PASS" });
    const miss = evaluateGoal(report(1.3), goal);
    expect(miss.status).toBe("MISS");
    expect(miss.measured).toMatch(/^worst 1.30× \(at 1\/s\)/);
  });

  it("ignores a rate where either is unstable", () => {
    expect(evaluateGoal(report(1.3, 1), goal).status).toBe("PASS");
  });
});

describe("held share", () => {
  const goal = { kind: "held-share", policy: "agentix", atLeast: 0.05 } as const;
  it("at the policy's highest sustained rate", () => {
    const r = sampleReport(["fcfs-rr", "agentix"]);
    // The fixture's agentix holds every call 30 ms, fcfs-rr none.
    expect(evaluateGoal(r, goal)).toMatchObject({ status: "PASS" });
    expect(evaluateGoal(r, goal).measured).toMatch(/^100.0 % at 1\/s/);
    const miss = evaluateGoal(r, { ...goal, policy: "fcfs-rr" });
    expect(miss).toMatchObject({ status: "MISS", measured: expect.stringMatching(/^0.0 %/) });
    expect(miss.note).toMatch(/the engines stayed under the pool's admission limits .*: mean batch 4 \(max 6\), KV 25 % mean, 50 % max/);
  });

  it("n/a when it sustained no rate", () => {
    const r = sampleReport(["fcfs-rr", "agentix"]);
    const agentix = r.headline.find((h) => h.policy === "agentix");
    if (agentix !== undefined) agentix.topRatePerSec = null;
    expect(evaluateGoal(r, goal).status).toBe("n/a");
  });
});

describe("group goals", () => {
  const report = sampleReport(["fcfs-rr", "agentix", "oracle"]);
  const stableRates = (policy: string) => (report.sweep[policy] ?? []).filter((p) => p.metrics.stability.stable);
  const tenantRatio = (point: (typeof report.sweep)[string][number]) =>
    (point.metrics.byTenant.ten_a?.meanMsPerToken as number) / (point.metrics.byTenant.ten_b?.meanMsPerToken as number);

  it("takes the worst ratio of two groups over the stable rates where the queue holds", () => {
    const ratios = stableRates("agentix").map(tenantRatio);
    expect(ratios).toHaveLength(2);
    const worst = Math.min(...ratios);
    const goal = (atLeast: number) =>
      ({ kind: "group", title: "churn", policy: "agentix", metric: "meanMsPerToken", group: { by: "tenant", id: "ten_a" }, versus: { group: { by: "tenant", id: "ten_b" } }, atLeast, where: { heldShareAtLeast: 0.5 } }) as const;
    expect(evaluateGoal(report, goal(worst - 0.01))).toMatchObject({ status: "PASS", measured: expect.stringMatching(new RegExp(`^worst ${worst.toFixed(2)}× .* over 2 rates$`)) });
    expect(evaluateGoal(report, goal(worst + 0.01)).status).toBe("MISS");
    // fcfs-rr's queue holds nothing: no rate qualifies, and the table says so.
    expect(evaluateGoal(report, { ...goal(0.9), policy: "fcfs-rr" })).toMatchObject({ status: "n/a", note: expect.stringMatching(/holds ≥ 50 % of calls/) });
  });

  it("compares a group with the same group of another policy, and bounds a figure alone", () => {
    const p99 = (policy: string, i: number) => stableRates(policy)[i]?.metrics.byKind["tree-search"]?.completionMs?.p99 as number;
    const worst = Math.max(p99("agentix", 0) / p99("fcfs-rr", 0), p99("agentix", 1) / p99("fcfs-rr", 1));
    const vsFcfs = { kind: "group", title: "long", policy: "agentix", metric: "completionP99", group: { by: "kind", id: "tree-search" }, versus: { policy: "fcfs-rr" }, atMost: worst } as const;
    expect(evaluateGoal(report, vsFcfs).status).toBe("PASS");
    expect(evaluateGoal(report, { ...vsFcfs, atMost: worst * 0.99 }).status).toBe("MISS");
    const alone = { kind: "group", title: "slowdown", policy: "agentix", metric: "meanMsPerToken", group: { by: "tenant", id: "ten_a" }, atMost: 1e9, where: { capacityShareAtMost: 0 } } as const;
    // No stable rate is at or below 0 % of capacity.
    expect(evaluateGoal(report, alone).status).toBe("n/a");
    expect(evaluateGoal(report, { ...alone, where: { capacityShareAtMost: 1e9 } })).toMatchObject({ status: "PASS", measured: expect.stringMatching(/over 2 rates/) });
  });

  it("a missed throughput goal names the ceiling no order can pass: capacity at steady state", () => {
    const note = evaluateGoal(withRatio(3, "="), { kind: "ratio", policy: "agentix", reference: "fcfs-rr", atLeast: 4 }).note;
    const capacity = Math.max(...stableRates("agentix").map((p) => p.metrics.capacityPerSec as number));
    expect(note).toContain(`no order sustains more than the engines' capacity at steady state`);
    expect(note).toContain(`${(capacity / 1).toFixed(2)}× fcfs-rr's 1/s`);
  });
});
