import { mkdtempSync, readdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chatRequestBody } from "../../../src/cli/bench/proxy-workload.js";
import { ownCpuMs } from "../../../src/cli/bench/relay-cpu.js";
import { runRelayLevel } from "../../../src/cli/bench/relay-load.js";
import { parseRelayBenchArgs, type RelayBenchOptions } from "../../../src/cli/bench/relay-options.js";
import { formatRelayTable, formatRelayVerdict, relayFailures, summariseRelayReport } from "../../../src/cli/bench/relay-report.js";
import { measureRelayThroughput, type RelayBenchReport } from "../../../src/cli/bench/relay-run.js";
import { RelayStreamReader } from "../../../src/cli/bench/relay-stream-reader.js";
import { directTarget, poolRelayTarget } from "../../../src/cli/bench/relay-targets.js";
import { startTokenSource, type TokenSourceHandle } from "../../../src/cli/bench/relay-token-source.js";
import { parsePoolConfig } from "../../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../../src/pool/server.js";

/*
 * The relay benchmark's machinery for real, kept to a few seconds: small levels of
 * short streams, engine direct and through a pool core (each in its own process).
 * Its figures must come from verified, complete streams only: a broken, short or
 * refused stream is a failure and its level shows no figure.
 */

const SHORT: RelayBenchOptions = {
  targets: ["engine", "pool"],
  levels: [3, 8],
  intervalMs: 20,
  tokens: 12,
  output: undefined,
  cpuProfileDir: mkdtempSync(path.join(tmpdir(), "agentix-relay-profile-")),
};

describe("relay benchmark flags", () => {
  it("defaults to the issue's levels and sorts and dedupes given ones", () => {
    expect(parseRelayBenchArgs([], "/repo")).toMatchObject({ levels: [100, 250, 500, 1000, 2000], intervalMs: 20, tokens: 200, targets: ["engine", "pool"] });
    expect(parseRelayBenchArgs(["--levels", "500,100,500", "--targets", "pool", "--cpu-profile", "prof"], "/repo")).toMatchObject({
      levels: [100, 500],
      targets: ["pool"],
      cpuProfileDir: "/repo/prof",
    });
    expect(parseRelayBenchArgs(["--help"], "/repo")).toBeUndefined();
  });

  it("takes a baseline pool tree, a directory resolved from the working directory, else a git revision", () => {
    const before = mkdtempSync(path.join(tmpdir(), "agentix-before-"));
    const relative = path.relative(process.cwd(), before);
    expect(parseRelayBenchArgs(["--baseline-pool", relative], "/repo")?.baselinePoolTree).toBe(before);
    expect(parseRelayBenchArgs([], "/repo")?.baselinePoolTree).toBeUndefined();
    expect(() => parseRelayBenchArgs(["--baseline-pool", "../no-such-tree"], "/repo")).toThrow(/neither a directory nor a git revision/);
  });

  it("refuses bad values with a message naming the flag", () => {
    expect(() => parseRelayBenchArgs(["--levels", "100,0"], "/repo")).toThrow(/--levels must be a number/);
    expect(() => parseRelayBenchArgs(["--tokens", "2.5"], "/repo")).toThrow(/--tokens must be an integer/);
    expect(() => parseRelayBenchArgs(["--targets", "portkey"], "/repo")).toThrow(/--targets takes/);
    expect(() => parseRelayBenchArgs(["--interval", "5"], "/repo")).toThrow();
  });
});

describe("relay benchmark against the token source and the pool", () => {
  let report: RelayBenchReport;
  beforeAll(async () => {
    report = await measureRelayThroughput(SHORT);
  }, 60_000);

  it("runs a warm-up per target, then every level and target with every stream complete", () => {
    expect(report.targets.map((t) => t.name)).toEqual(["engine", "pool"]);
    expect(report.runs.filter((r) => r.phase === "warmup").map((r) => r.target)).toEqual(["engine", "pool"]);
    const measured = report.runs.filter((r) => r.phase === "measure");
    // Every other level in reverse order.
    expect(measured.map((r) => `${r.target}@${r.figures.streams}`)).toEqual(["engine@3", "pool@3", "pool@8", "engine@8"]);
    for (const { figures } of measured) {
      expect(figures.failed).toBe(0);
      expect(figures.completed).toBe(figures.streams);
      // Exactly `tokens` content chunks reached the client on every stream.
      expect(figures.tokensReceived).toBe(figures.streams * SHORT.tokens);
      expect(figures.offeredTokensPerSecond).toBe(figures.streams * 50);
      expect(figures.deliveredTokensPerSecond).toBeGreaterThan(0);
      expect(figures.gapMs?.p99).toBeGreaterThanOrEqual(figures.gapMs?.p50 ?? Infinity);
      expect(figures.ttftMs?.p50).toBeGreaterThan(0);
      expect(figures.cpuPercent.client).toBeTypeOf("number");
    }
    // The pool's CPU and run-queue wait are read from its own process.
    const poolCpu = measured.find((r) => r.target === "pool")?.figures.cpuPercent;
    expect(poolCpu?.pool).toBeTypeOf("number");
    expect(poolCpu?.poolWait).toBeTypeOf("number");
  });

  it("summarises every level with a figure and states the saturation verdicts", () => {
    const summary = summariseRelayReport(report);
    expect(summary.rows).toHaveLength(4);
    expect(summary.rows.every((row) => row.figures !== null && row.failed === 0)).toBe(true);
    expect(relayFailures(summary)).toEqual([]);
    expect(summary.poolPeakTokensPerSecond).toBeGreaterThan(0);
    expect(formatRelayTable(report, summary)).toMatch(/\n\s+8\s+pool\s+400\s+\d+/);
    expect(formatRelayVerdict(report, summary)).toMatch(/^Pool (saturates at|kept up at every level)/);
  });

  it("writes the pool core's CPU profile when asked", () => {
    expect(readdirSync(SHORT.cpuProfileDir!).filter((name) => name.endsWith(".cpuprofile")).length).toBeGreaterThan(0);
  });
});

describe("relay benchmark with a baseline pool core (--baseline-pool)", () => {
  let report: RelayBenchReport;
  beforeAll(async () => {
    // This checkout as its own baseline: the machinery, not a difference, is under test.
    report = await measureRelayThroughput({ ...SHORT, targets: ["pool"], levels: [2, 3], cpuProfileDir: undefined, baselinePoolTree: process.cwd() });
  }, 60_000);

  it("measures the baseline pool in the same levels, beside the pool (first at one level, second at the next), each with its own process's CPU", () => {
    expect(report.targets.map((t) => t.name)).toEqual(["pool-baseline", "pool"]);
    const measured = report.runs.filter((r) => r.phase === "measure");
    expect(measured.map((r) => `${r.target}@${r.figures.streams}`)).toEqual(["pool-baseline@2", "pool@2", "pool@3", "pool-baseline@3"]);
    for (const { figures } of measured) {
      expect(figures.failed).toBe(0);
      expect(figures.tokensReceived).toBe(figures.streams * SHORT.tokens);
      expect(figures.cpuPercent.pool0).toBeTypeOf("number");
      expect(figures.cpuPercent.pool).toBeTypeOf("number");
    }
    const summary = summariseRelayReport(report);
    expect(summary.baselinePeakTokensPerSecond).toBeGreaterThan(0);
    const table = formatRelayTable(report, summary);
    expect(table).toMatch(/\n\s+3\s+pool0\s+150\s+\d+/);
    // Each row shows its own pool's CPU.
    const poolRows = table.split("\n").filter((line) => /^\s+\d+\s+pool0?\s/.test(line));
    expect(poolRows).toHaveLength(4);
    for (const row of poolRows) expect(row).toMatch(/\d+ %\s+\d+ %\s+\d+ %\s+\d+ %/);
    expect(formatRelayVerdict(report, summary)).toMatch(/Baseline pool \(pool0\) (saturates at|kept up at every level)/);
  });
});

describe("relay benchmark failure detection", () => {
  const key = { id: "relay-test", secret: "relay-test-signing-secret-0123456789" };
  let source: TokenSourceHandle;
  let pool: PoolHandle;
  let truncating: Server;
  let truncatingUrl: string;
  let fullStream: string;
  const TOKENS = 6;
  const body = () => chatRequestBody({ model: source.model, mode: "streaming", maxTokens: TOKENS });

  beforeAll(async () => {
    source = await startTokenSource({ intervalMs: 5 });
    pool = await startPool(
      parsePoolConfig({
        port: 0,
        signingKeys: [key],
        engines: [{ id: "source", url: source.url, kind: "openai", maxInFlight: 16, kvCapacityTokens: 1_000_000 }],
      }),
    );
    const res = await fetch(`${source.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: body() });
    fullStream = await res.text();
    // A server that sends the source's own stream but breaks off after its third token.
    const cut = fullStream.split("\n\n").slice(0, 4).join("\n\n") + "\n\n";
    truncating = createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(cut, () => res.destroy());
    });
    await new Promise<void>((resolve) => truncating.listen(0, "127.0.0.1", resolve));
    truncatingUrl = `http://127.0.0.1:${(truncating.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await pool?.close();
    await source?.close();
    await new Promise((resolve) => truncating?.close(resolve));
  });

  const read = (text: string) => {
    const reader = new RelayStreamReader(TOKENS, () => {});
    reader.push(Buffer.from(text), 0);
    return { reader, verdict: reader.end() };
  };

  it("accepts the source's complete stream and rejects short, unfinished or erroring ones", () => {
    const complete = read(fullStream);
    expect(complete.verdict).toEqual({ ok: true });
    expect(complete.reader.contentChunks).toBe(TOKENS);

    const events = fullStream.split("\n\n").filter(Boolean);
    const tokenEvent = events.findIndex((event) => event.includes('"content":"tok "'));
    const withoutOneToken = events.filter((_, index) => index !== tokenEvent).join("\n\n") + "\n\n";
    expect(read(withoutOneToken).verdict).toMatchObject({ ok: false, reason: `${TOKENS - 1} content chunks instead of ${TOKENS}` });
    expect(read(fullStream.slice(0, fullStream.lastIndexOf("data: [DONE]"))).verdict).toMatchObject({ ok: false, reason: expect.stringMatching(/without \[DONE\]/) });
    const withError = fullStream.replace("data: [DONE]", 'data: {"error":{"message":"engine broke off"}}\n\ndata: [DONE]');
    expect(read(withError).verdict).toMatchObject({ ok: false, reason: expect.stringMatching(/error event/) });
    expect(read(`${fullStream}data: {"object":"chat.completion.chunk"}\n\n`).verdict).toMatchObject({ ok: false, reason: "data after [DONE]" });
  });

  it("counts streams that break off as failures", async () => {
    const target = directTarget({ url: truncatingUrl }, 4);
    try {
      const figures = await runRelayLevel({
        dispatcher: target.dispatcher,
        path: target.path,
        headers: target.headers,
        body: body(),
        streamHeaders: () => ({}),
        streams: 4,
        tokens: TOKENS,
        intervalMs: 5,
        deadlineMs: 10_000,
        cpu: { client: ownCpuMs },
      });
      expect(figures.completed).toBe(0);
      expect(figures.failed).toBe(4);
      expect(Object.keys(figures.failureReasons).join("\n")).toMatch(/broke off after N tokens/);
    } finally {
      await target.dispatcher.close();
    }
  });

  it("reports a refused (wrongly signed) pool level as failed, with no figure", async () => {
    const target = poolRelayTarget(pool, { id: key.id, secret: "not-the-pool-secret-0123456789" }, 4);
    let report: RelayBenchReport;
    try {
      const figures = await runRelayLevel({
        dispatcher: target.dispatcher,
        path: target.path,
        headers: target.headers,
        body: body(),
        streamHeaders: await target.prepare(4, body()),
        streams: 4,
        tokens: TOKENS,
        intervalMs: 5,
        deadlineMs: 10_000,
        cpu: { client: ownCpuMs },
      });
      expect(figures.failed).toBe(4);
      expect(figures.tokensReceived).toBe(0);
      expect(figures.deliveredTokensPerSecond).toBeNull();
      expect(Object.keys(figures.failureReasons).join("\n")).toMatch(/^status N: /);
      report = {
        startedAt: "",
        finishedAt: "",
        machine: { cpus: 2, cpuModel: "test", node: process.version, platform: "test", loadAverage: { start: 0, end: 0 } },
        options: { ...SHORT, targets: ["pool"], levels: [4], intervalMs: 5, tokens: TOKENS },
        targets: [{ name: "pool", label: target.label, description: target.description }],
        runs: [{ target: "pool", phase: "measure", figures, loadAverage: 0 }],
      };
    } finally {
      await target.dispatcher.close();
    }
    const summary = summariseRelayReport(report);
    expect(summary.rows[0]?.figures).toBeNull();
    expect(summary.poolSaturation?.rules).toContain("streams failed");
    expect(summary.poolPeakTokensPerSecond).toBeNull();
    expect(relayFailures(summary).join("\n")).toMatch(/pool at 4 streams: 4\/4 streams failed \(4× status N: /);
    expect(formatRelayTable(report, summary)).toMatch(/FAILED: 4\/4 streams broken or short, no figure/);
  });
});
