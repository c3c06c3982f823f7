import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, describe, expect, it } from "vitest";
import { projectRoot } from "../../src/cli/bench/proxy-run.js";
import { PoolMetrics } from "../../src/pool/metrics.js";
import { labelValue, parsePrometheusText } from "../../src/pool/prometheus-text.js";

/*
 * The pool process's own series on /metrics (PoolMetrics.includeProcessMetrics): its
 * garbage collector, CPU and memory, read in production as bench:proxy reads them.
 */

const OPERATOR_TOKEN = "process-metrics-operator-token-0123456789";

/** The value of the series `name` (with `kind` when given) in Prometheus text, or undefined. */
function sample(text: string, name: string, kind?: string): number | undefined {
  return parsePrometheusText(text).find((s) => s.name === name && labelValue(s, "kind") === kind)?.value;
}

describe("PoolMetrics.includeProcessMetrics", () => {
  it("adds the process's series, the collector's pauses by kind among them; a pool that does not ask has none", async () => {
    const bare = new PoolMetrics();
    const withProcess = new PoolMetrics();
    withProcess.includeProcessMetrics();
    v8.setFlagsFromString("--expose-gc");
    (runInNewContext("gc") as () => void)();
    // Node hands gc entries to observers after the collection, not within it.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const text = await withProcess.registry.metrics();
    expect(sample(text, "nodejs_gc_duration_seconds_count", "major")).toBeGreaterThanOrEqual(1);
    expect(sample(text, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    expect(text).toContain("nodejs_heap_space_size_used_bytes");
    expect(await bare.registry.metrics()).not.toContain("nodejs_gc_duration_seconds");
  });
});

describe("npm run pool's /metrics", () => {
  let child: ChildProcess | undefined;
  afterAll(async () => {
    if (child !== undefined && child.exitCode === null) {
      child.kill("SIGTERM");
      await once(child, "exit");
    }
  });

  it("has the process's series", { timeout: 30_000 }, async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "agentix-process-metrics-"));
    const configPath = path.join(dir, "pool.json");
    writeFileSync(
      configPath,
      JSON.stringify({
        host: "127.0.0.1",
        port: 0,
        operatorToken: OPERATOR_TOKEN,
        signingKeys: [{ id: "k1", secret: "process-metrics-signing-secret-0123456789" }],
        // Nothing listens there: the pool starts with the engine unhealthy, which /metrics does not need.
        engines: [{ id: "e1", url: "http://127.0.0.1:9", kind: "vllm" }],
      }),
    );
    const started = spawn(process.execPath, ["--import", "tsx", "src/pool/main.ts", "--config", configPath], { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] });
    child = started;
    let output = "";
    const url = await new Promise<string>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString("utf8");
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match?.[1]) resolve(match[1]);
      };
      started.stdout?.on("data", onData);
      started.stderr?.on("data", onData);
      started.once("exit", (code) => reject(new Error(`pool exited (${code}) before listening:\n${output}`)));
    });
    const response = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${OPERATOR_TOKEN}` } });
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain("# TYPE nodejs_gc_duration_seconds histogram");
    expect(sample(text, "process_cpu_user_seconds_total")).toBeGreaterThan(0);
    // The pool's own series are still there beside them.
    expect(text).toContain("agentix_pool_");
  });
});
