import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runSchedulingBenchWith, type SchedulingBenchIo } from "../../../src/cli/bench/scheduling.js";
import { simulate } from "../../../src/sim/des/simulate.js";
import type { BenchReport } from "../../../src/sim/report/bench-report.js";

/*
 * End to end on the real simulator: a tiny workload (short chats, no tool time) so
 * a --quick run takes a few seconds, then the three outputs.
 */

const TINY = {
  name: "tiny-chat",
  arrival: { process: "poisson", ratePerSec: 1 },
  programs: { count: 16 },
  mix: [{ kind: "chat", params: { callsPerProgram: 3, newPromptTokens: 64, outputTokens: 24 } }],
};

let dir: string;
let workloadPath: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "agentix-bench-"));
  workloadPath = path.join(dir, "tiny.json");
  await writeFile(workloadPath, JSON.stringify(TINY));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function io(): SchedulingBenchIo & { out: string[]; err: string[] } {
  const out: string[] = [];
  const err: string[] = [];
  return {
    out,
    err,
    stdout: (text) => out.push(text),
    stderr: { write: (text: string) => err.push(text), isTTY: false },
    simulate,
    cwd: dir,
    now: () => performance.now(),
    date: () => new Date("2026-05-01T12:00:00Z"),
  };
}

describe("agentix bench --quick on a tiny workload", () => {
  it("runs the policies side by side and writes the tables, the JSON and the HTML", async () => {
    const sink = io();
    const result = await runSchedulingBenchWith(["--quick", "--batch", "--workload", workloadPath, "--policies", "fcfs-rr,plas,agentix", "--engines", "1", "--out", "results"], sink);
    expect(result).toBeDefined();
    const { report, jsonPath, htmlPath } = result as NonNullable<typeof result>;
    expect(path.dirname(jsonPath)).toBe(path.join(dir, "results"));
    expect(path.basename(jsonPath)).toBe("scheduling-tiny-chat-20260501-120000.json");

    // stdout: the preamble, the tables (a row per policy), the file names.
    const stdout = sink.out.join("");
    for (const policy of ["fcfs-rr", "plas", "agentix"]) expect(stdout).toMatch(new RegExp(`^${policy}\\s`, "m"));
    expect(stdout).toContain("SLO: mean normalised latency ≤");
    for (const title of ["Throughput at equal mean normalised latency", "Was ordering engaged?", "Mean normalised latency (ms/token) by arrival rate", "Share of calls held", "Per kind:"]) expect(stdout).toContain(title);
    expect(stdout).toContain("results/scheduling-tiny-chat-20260501-120000.html");

    // stderr: plain progress lines (not a TTY), one per run.
    const stderr = sink.err.join("");
    expect(stderr).not.toContain("\r");
    expect(stderr).toMatch(/^\[1\/\d+\] fcfs-rr batch: 16\/16 finished/m);

    // JSON: everything, and what the function returned.
    const json = JSON.parse(await readFile(jsonPath, "utf8")) as BenchReport;
    expect(json).toEqual(JSON.parse(JSON.stringify(report)));
    expect(json.format).toBe("agentix-scheduling-bench/2");
    expect(json.config).toMatchObject({ workloadName: "tiny-chat", programsPerRun: 16, engines: 1, ratesSource: "capacity-estimate", gapScale: 1, planWeights: {} });
    expect(json.config.capacity?.perSec).toBeGreaterThan(0);
    expect(json.baseline).toBe("fcfs-rr");
    expect(json.slo.source).toBe("default");
    expect(json.headline.map((h) => h.policy)).toEqual(["fcfs-rr", "plas", "agentix"]);
    expect(json.references).toEqual(["fcfs-rr"]);
    expect(json.batch.map((b) => b.policy)).toEqual(["fcfs-rr", "plas", "agentix"]);
    for (const b of json.batch) {
      expect(b.metrics.finished).toBe(16);
      expect(b.makespanMs).toBeGreaterThan(0);
    }
    for (const policy of json.config.policies) {
      const points = json.sweep[policy] ?? [];
      expect(points.length).toBeGreaterThanOrEqual(3);
      // Every policy ran every rate of the baseline's ladder.
      for (const rate of (json.sweep["fcfs-rr"] ?? []).map((p) => p.ratePerSec)) expect(points.map((p) => p.ratePerSec)).toContain(rate);
      for (const p of points) {
        // 16 programs: 3 warm up, 3 cool down, 10 measured.
        expect(p.metrics.window).toMatchObject({ warmup: 3, measured: 10, cooldown: 3 });
        expect(p.metrics.overall.finished).toBe(10);
        expect(p.metrics.overall.meanMsPerToken).toBeGreaterThan(0);
        expect(p.samples.length).toBeGreaterThan(100);
        expect(p.metrics.engagement.engines).toHaveLength(1);
      }
    }
    // The SLO is 5× the baseline's mean at its lowest rate.
    const lowest = json.sweep["fcfs-rr"]?.[0]?.metrics.overall.meanMsPerToken ?? Number.NaN;
    expect(json.slo.msPerToken).toBeCloseTo(5 * lowest, 9);
    expect(json.cdf.series.every((s) => s.quantiles.length === 101)).toBe(true);

    // HTML: self-contained, with every policy.
    const html = await readFile(htmlPath, "utf8");
    expect(html).not.toMatch(/<script|<link|\s(src|href)=/i);
    expect(html.match(/<svg /g)).toHaveLength(5);
    for (const policy of ["fcfs-rr", "plas", "agentix"]) expect(html).toContain(`>${policy}</text>`);
  });

  it("takes explicit rates and an SLO as given", async () => {
    const sink = io();
    const result = await runSchedulingBenchWith(
      // A relative workload path resolves against the working directory.
      ["--workload", "tiny.json", "--programs", "10", "--policies", "fcfs-rr,agentix", "--rates", "0.05,0.1", "--slo-ms-per-token", "1000", "--out", "explicit"],
      sink,
    );
    const report = (result as NonNullable<typeof result>).report;
    expect(report.config.rates).toEqual([0.05, 0.1]);
    expect(report.config.ratesSource).toBe("user");
    expect(report.slo).toMatchObject({ msPerToken: 1000, source: "user" });
    expect(report.sweep.agentix?.map((p) => p.ratePerSec)).toEqual([0.05, 0.1]);
    // A generous SLO is met everywhere: the sustained rates are lower bounds and the ratio unknown.
    expect(report.headline[0]?.sustained).toEqual({ ratePerSec: 0.1, relation: ">=" });
    expect(report.headline[1]?.ratios["fcfs-rr"]).toBeNull();
    expect(report.notes.join(" ")).toMatch(/fcfs-rr met the SLO at every rate, up to 0.1 prog\/s/);
  });

  it("a rate at which the programs arrive in a burst is not a steady state, whatever its mean", async () => {
    const result = await runSchedulingBenchWith(["--workload", "tiny.json", "--programs", "10", "--policies", "fcfs-rr", "--rates", "0.05,50", "--slo-ms-per-token", "1000", "--out", "burst"], io());
    const report = (result as NonNullable<typeof result>).report;
    const burst = report.sweep["fcfs-rr"]?.[1];
    expect(burst?.metrics.overall.meanMsPerToken).toBeLessThan(1000);
    expect(burst?.metrics.stability.stable).toBe(false);
    expect(burst?.metrics.stability.reasons.join()).toMatch(/a burst, not a steady state/);
    expect(report.headline[0]?.sustained).toEqual({ ratePerSec: 0.05, relation: "=" });
  });

  it("--regime runs the regime's setting and prints its goals (overridden here to stay small)", async () => {
    const sink = io();
    const result = await runSchedulingBenchWith(
      ["--regime", "autellix", "--workload", "tiny.json", "--programs", "10", "--policies", "fcfs-rr,fcfs-least-loaded,agentix,oracle", "--rates", "0.05,0.1", "--out", "regime"],
      sink,
    );
    const report = (result as NonNullable<typeof result>).report;
    expect(report.config).toMatchObject({ regime: "autellix", engines: 1, engineProfile: "llama-3.1-8b-a100", gapScale: 0 });
    expect(report.goals.map((g) => g.goal)).toEqual([
      "agentix sustains ≥ 2× fcfs-least-loaded at equal mean normalised latency",
      "agentix sustains ≥ 4× fcfs-rr at equal mean normalised latency",
      "agentix within 1.25× the oracle's mean normalised latency",
      "the pool queue holds a visible share of agentix's calls",
    ]);
    expect(report.paper?.paper).toMatch(/4–15×/);
    expect(report.notes[0]).toMatch(/regime autellix with --workload, --policies, --rates, --programs given/);
    const stdout = sink.out.join("");
    expect(stdout).toMatch(/^Goals \(autellix\)/m);
    expect(stdout).toMatch(/^Paper: Autellix/m);
    expect(stdout).toMatch(/scheduling-autellix-tiny-chat-/);
  });

  it("--help prints the usage and runs nothing", async () => {
    const sink = io();
    expect(await runSchedulingBenchWith(["--help"], sink)).toBeUndefined();
    expect(sink.out.join("")).toContain("agentix bench [options]");
  });

  it("a bad workload file fails with the field named", async () => {
    const bad = path.join(dir, "bad.json");
    await writeFile(bad, JSON.stringify({ ...TINY, mix: [{ kind: "chat", params: { outputTokens: -1 } }] }));
    await expect(runSchedulingBenchWith(["--workload", bad, "--quick"], io())).rejects.toThrow(/mix\.0\.params\.outputTokens/);
  });
});
