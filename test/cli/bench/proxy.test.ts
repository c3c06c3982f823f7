import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failuresOf, type LoadFigures, runLoad } from "../../../src/cli/bench/proxy-load.js";
import type { ProxyBenchOptions } from "../../../src/cli/bench/proxy-options.js";
import { probeTarget, referenceCompletion } from "../../../src/cli/bench/proxy-probe.js";
import { formatProxyTable, proxyFailures, summariseProxyReport } from "../../../src/cli/bench/proxy-report.js";
import { measureProxyOverhead, projectRoot, type ProxyBenchReport, type TargetRun } from "../../../src/cli/bench/proxy-run.js";
import { SignedRequestStock } from "../../../src/cli/bench/proxy-signed-requests.js";
import { poolTarget } from "../../../src/cli/bench/proxy-targets.js";
import { type ChatWorkload, chatRequestBody, completionVerifier } from "../../../src/cli/bench/proxy-workload.js";
import { parsePoolConfig } from "../../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../../src/pool/server.js";
import { Header } from "../../../src/protocol/headers.js";
import { POOL_PATHS, verifyForward } from "../../../src/protocol/signing.js";
import { type SimEngineHandle, startSimEngine } from "../../../src/sim/engine-server.js";

/*
 * The proxy benchmark's machinery for real, kept short: engine direct and the pool
 * (no wrangler, no Portkey), half-second runs. Its figures must come from verified
 * 2xx completions only; a wrongly signed pool run must show up as failures.
 */

const SHORT: ProxyBenchOptions = {
  targets: ["engine", "node-proxy", "pool"],
  modes: ["non-streaming", "streaming"],
  durationSeconds: 0.3,
  warmupSeconds: 0,
  rounds: 2,
  connections: [1, 4],
  moderateConnections: 4,
  maxTokens: 8,
  engineInFlight: 4,
  output: undefined,
  cpuProfileDir: mkdtempSync(path.join(tmpdir(), "agentix-proxy-profile-")),
  placement: "free",
};

describe("proxy benchmark against the engine and the pool", () => {
  let report: ProxyBenchReport;
  beforeAll(async () => {
    // The baseline pool from this same tree: the machinery of a before/after in one run.
    report = await measureProxyOverhead({ ...SHORT, baselinePoolTree: projectRoot });
  }, 60_000);

  it("probes each target and runs every target, mode and level with no failure", () => {
    expect(report.targets.map((t) => t.name)).toEqual(["engine", "node-proxy", "pool-baseline", "pool"]);
    expect(report.probes).toHaveLength(8);
    expect(report.probes.every((p) => p.status === 200 && p.reachedEngine && p.matchesEngine)).toBe(true);
    // 2 rounds × 2 modes × 2 levels × 4 targets, the second round in reversed target order.
    expect(report.runs).toHaveLength(2 * 2 * 2 * 4);
    const firstLevel = (round: number) => report.runs.filter((r) => r.round === round).slice(0, 4).map((r) => r.target);
    expect(firstLevel(0)).toEqual(["engine", "node-proxy", "pool-baseline", "pool"]);
    expect(firstLevel(1)).toEqual(["pool", "pool-baseline", "node-proxy", "engine"]);
    for (const run of report.runs) {
      expect(run.phase).toBe("measure");
      expect(run.figures.responses).toBeGreaterThan(0);
      expect(run.figures.statusCodes).toEqual({ "200": run.figures.responses });
      expect(failuresOf(run.figures)).toBe(0);
      expect(run.shortfall).toBe(0);
      expect(run.figures.requestsPerSecond).toBeGreaterThan(0);
      expect(Number.isFinite(run.figures.latencyMs.p50)).toBe(true);
      expect(run.figures.latencyMs.p99).toBeGreaterThanOrEqual(run.figures.latencyMs.p50);
      // Every process the bench started reports its collector (the baseline tree's too).
      expect(run.gc).toBeDefined();
      for (const value of Object.values(run.gc ?? {})) expect(value).toBeGreaterThanOrEqual(0);
    }
    // A pool allocates tens of KB a call: its runs together cannot pass without a scavenge.
    for (const target of ["pool", "pool-baseline"] as const) {
      const scavenges = report.runs.filter((r) => r.target === target).reduce((sum, r) => sum + (r.gc?.minorCount ?? 0), 0);
      expect(scavenges).toBeGreaterThan(0);
    }
  });

  it("writes the pool core's CPU profile when asked", () => {
    const profiles = readdirSync(SHORT.cpuProfileDir!).filter((name) => name.endsWith(".cpuprofile"));
    expect(profiles.length).toBeGreaterThan(0);
    // Only the pool under test is profiled, not the baseline beside it.
    expect(new Set(profiles.map((name) => name.split(".")[3])).size).toBe(1);
  });

  it("summarises throughput, latency added over the engine and max throughput per target and mode", () => {
    const { rows, edgeOnly } = summariseProxyReport(report);
    expect(rows.map((r) => `${r.mode}/${r.target}`)).toEqual([
      "non-streaming/engine",
      "non-streaming/node-proxy",
      "non-streaming/pool-baseline",
      "non-streaming/pool",
      "streaming/engine",
      "streaming/node-proxy",
      "streaming/pool-baseline",
      "streaming/pool",
    ]);
    expect(edgeOnly).toEqual([]);
    for (const row of rows) {
      expect(row.failed).toBe(false);
      expect(row.rps).toBeGreaterThan(0);
      expect(row.maxRps).toBeGreaterThanOrEqual(row.rps);
      expect([1, 4]).toContain(row.maxRpsConnections);
      // Read from /proc for each target's own process: some CPU per call, and less than a second of it.
      expect(row.cpuUsPerCall).toBeGreaterThan(0);
      expect(row.cpuUsPerCall).toBeLessThan(1_000_000);
      expect(row.gcUsPerCall).toBeGreaterThanOrEqual(0);
      expect(row.fullGcsPer10k).toBeGreaterThanOrEqual(0);
      if (row.target === "engine") expect(row.addedP50Ms).toBeNull();
      else {
        expect(row.addedP50Ms).toBeTypeOf("number");
        expect(row.addedP50AtOneMs).toBeTypeOf("number");
        const [low, high] = row.addedP50AtOneRangeMs ?? [Number.NaN, Number.NaN];
        expect(low).toBeLessThanOrEqual(row.addedP50AtOneMs!);
        expect(high).toBeGreaterThanOrEqual(row.addedP50AtOneMs!);
      }
    }
    expect(proxyFailures(rows)).toEqual([]);
    const table = formatProxyTable(report);
    expect(table).toMatch(/non-streaming\s+\(b\) pool/);
    expect(table).toMatch(/streaming\s+\(a\) engine/);
  });
});

const SIGNED_CALL = { method: "POST", path: POOL_PATHS.chatCompletions };

describe("proxy benchmark failure detection", () => {
  // In this process: these checks need a real pool, not process isolation.
  const key = { id: "bench-test", secret: "bench-test-signing-secret-0123456789" };
  let engine: SimEngineHandle;
  let pool: PoolHandle;
  const workload: ChatWorkload = { model: "sim-llama-3.1-8b", mode: "streaming", maxTokens: 8 };

  beforeAll(async () => {
    engine = await startSimEngine({ timeScale: Infinity });
    pool = await startPool(
      parsePoolConfig({ port: 0, signingKeys: [key], engines: [{ id: "sim-1", url: engine.url, kind: "vllm", maxInFlight: 4 }] }),
    );
  });
  afterAll(async () => {
    await pool?.close();
    await engine?.close();
  });

  it("presigns unique call IDs that the pool's verification accepts", async () => {
    const body = chatRequestBody(workload);
    const stock = new SignedRequestStock(key, body, { tenant: "ten_test", programs: ["prog_aaaaaaaa"], thread: "main" });
    await stock.fill(3);
    const signed = [stock.take(), stock.take(), stock.take()];
    expect(new Set(signed.map((h) => h[Header.call])).size).toBe(3);
    for (const headers of signed) {
      const verified = await verifyForward([key], SIGNED_CALL, new Headers(headers), body, { now: Date.now(), windowMs: 30_000 });
      expect(verified).toMatchObject({ ok: true, keyId: key.id });
    }
    expect(stock.take()).toEqual({});
    expect(stock.exhausted).toBe(1);
  });

  it("rejects truncated or short completions", async () => {
    const res = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: chatRequestBody(workload),
    });
    const text = await res.text();
    const verify = completionVerifier(workload);
    expect(verify(text)).toBe(true);
    expect(verify(text.slice(0, text.lastIndexOf("data: [DONE]")))).toBe(false);
    expect(completionVerifier({ ...workload, maxTokens: 9 })(text)).toBe(false);
    expect(verify('{"error":{"message":"nope"}}')).toBe(false);
  });

  it("counts a wrongly signed pool run as failures, and its probe fails", async () => {
    const wronglySigned = poolTarget(pool, engine.url, { id: key.id, secret: "not-the-pool-secret-0123456789" });
    const reference = await referenceCompletion(engine.url, workload);
    await expect(probeTarget(wronglySigned, workload, reference)).rejects.toThrow(/probe failed.*status 401/s);

    const body = chatRequestBody(workload);
    const prepared = await wronglySigned.prepareRun({ body, connections: 2, durationSeconds: 0.5, expectedRps: 2_000 });
    const figures = await runLoad(
      { url: wronglySigned.url, headers: wronglySigned.headers, body, session: prepared.session, verifyBody: completionVerifier(workload) },
      { connections: 2, durationSeconds: 0.5 },
    );
    expect(figures.responses).toBeGreaterThan(0);
    expect(figures.non2xx).toBe(figures.responses);
    expect(figures.statusCodes["401"]).toBe(figures.responses);
    expect(failuresOf(figures)).toBeGreaterThan(0);

    const failed: ProxyBenchReport = {
      startedAt: "",
      finishedAt: "",
      machine: { cpus: 2, cpuModel: "test", node: process.version, platform: "test", loadAverage: { start: 0, end: 0 } },
      options: { ...SHORT, targets: ["pool"], modes: ["streaming"], connections: [2], moderateConnections: 2 },
      cpus: {},
      model: workload.model,
      edgeStateBase: null,
      targets: [{ name: "pool", label: wronglySigned.label, description: wronglySigned.description }],
      probes: [],
      runs: [{ target: "pool", mode: "streaming", phase: "measure", round: 0, figures, shortfall: prepared.shortfall() }],
    };
    const { rows } = summariseProxyReport(failed);
    expect(rows[0]?.failed).toBe(true);
    expect(proxyFailures(rows).join("\n")).toMatch(/\(b\) pool streaming: \d+ non-2xx \(401×\d+\)/);

    // A run in which nothing completed has no figure to report: also a failure.
    const empty = { ...figures, responses: 0, non2xx: 0, statusCodes: {} };
    const emptyReport = { ...failed, runs: [{ ...failed.runs[0]!, figures: empty, shortfall: 0 }] };
    expect(proxyFailures(summariseProxyReport(emptyReport).rows).join("\n")).toMatch(/1 runs with no completed response/);
  });
});

describe("proxy benchmark summary over rounds", () => {
  const figuresOf = (connections: number, rps: number, p50: number): LoadFigures => ({
    connections,
    durationSeconds: 1,
    responses: rps,
    requestsPerSecond: rps,
    latencyMs: { p50, p90: p50, p99: p50 * 2, mean: p50, max: p50 * 3 },
    non2xx: 0,
    errors: 0,
    timeouts: 0,
    mismatches: 0,
    statusCodes: { "200": rps },
  });
  const run = (target: "engine" | "pool", round: number, rps: number, p50: number): TargetRun => ({
    target,
    mode: "non-streaming",
    phase: "measure",
    round,
    figures: figuresOf(1, rps, p50),
    shortfall: 0,
  });

  it("reports the median round, and the latency added as the median of each round's own difference", () => {
    const report: ProxyBenchReport = {
      startedAt: "",
      finishedAt: "",
      machine: { cpus: 2, cpuModel: "test", node: process.version, platform: "test", loadAverage: { start: 0, end: 0 } },
      options: { ...SHORT, targets: ["engine", "pool"], modes: ["non-streaming"], connections: [1], moderateConnections: 1, rounds: 3 },
      cpus: {},
      model: "m",
      edgeStateBase: null,
      targets: [
        { name: "engine", label: "(a) engine", description: "" },
        { name: "pool", label: "(b) pool", description: "" },
      ],
      probes: [],
      // Round 1 ran while the machine was busy: both slow, by a lot.
      runs: [run("engine", 0, 1000, 1), run("pool", 0, 500, 2), run("engine", 1, 100, 10), run("pool", 1, 90, 10.5), run("engine", 2, 900, 1.2), run("pool", 2, 450, 2.4)],
    };
    const [engine, pool] = summariseProxyReport(report).rows;
    expect(engine?.rps).toBe(900);
    expect(pool?.rps).toBe(450);
    expect(pool?.p50AtOneMs).toBe(2.4);
    // Differences per round: +1, +0.5, +1.2; median +1 (not 2.4 − 1.2).
    expect(pool?.addedP50AtOneMs).toBe(1);
    expect(pool?.addedP50AtOneRangeMs).toEqual([0.5, 1.2]);
    expect(pool?.maxRps).toBe(450);
  });
});
