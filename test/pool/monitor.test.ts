import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { EngineMonitor, type EngineMonitorOptions, type EngineReading } from "../../src/pool/engine-monitor.js";
import { adapterFor, type EngineKind } from "../../src/pool/engines/index.js";
import { parsePrometheusText, valuesOf } from "../../src/pool/prometheus-text.js";
import { ReplayGuard } from "../../src/pool/replay-guard.js";
import { type FakeEngine, refusedUrl, startFakeEngine } from "./fake-engine.js";
import { waitFor } from "./helpers.js";

describe("Prometheus text", () => {
  it("reads samples with and without labels, skipping comments and junk", () => {
    const samples = parsePrometheusText(
      [
        "# HELP vllm:num_requests_waiting Waiting.",
        "# TYPE vllm:num_requests_waiting gauge",
        'vllm:num_requests_waiting{model_name="a b",engine="0"} 3',
        'vllm:num_requests_waiting{model_name="m",engine="1"} 2.0 1712345678000',
        "vllm:kv_cache_usage_perc 0.25",
        "not a sample line",
        "x_total NaN",
      ].join("\n"),
    );
    expect(valuesOf(samples, ["vllm:num_requests_waiting"])).toEqual([3, 2]);
    expect(valuesOf(samples, ["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"])).toEqual([0.25]);
    expect(valuesOf(samples, ["x_total"])).toEqual([]);
  });
});

describe("ReplayGuard", () => {
  it("refuses an ID seen within the window, forgets it after, and refuses when full", () => {
    const guard = new ReplayGuard(1_000, 2);
    expect(guard.check("a", 0)).toBe("fresh");
    expect(guard.check("a", 999)).toBe("replayed");
    expect(guard.check("b", 500)).toBe("fresh");
    expect(guard.check("c", 600)).toBe("full");
    expect(guard.check("a", 1_000)).toBe("fresh");
    expect(guard.size).toBe(2);
  });
});

describe("EngineMonitor", () => {
  const stops: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const stop of stops.splice(0)) await stop();
  });

  async function monitorOf(engines: { id: string; url: string; kind: EngineKind }[], saturated?: EngineMonitorOptions["saturated"]) {
    const http = new Agent();
    let last: EngineReading[] = [];
    const monitor = new EngineMonitor({
      engines: engines.map((e) => {
        const adapter = adapterFor(e.kind);
        return { ...e, adapter, healthPath: adapter.healthPath, metricsPath: adapter.metricsPath };
      }),
      http,
      intervalMs: 10_000,
      ...(saturated === undefined ? {} : { saturated }),
      probeTimeoutMs: 1_000,
      unhealthyAfterFailures: 2,
      onReadings: (readings) => (last = readings),
    });
    stops.push(async () => {
      await monitor.stop();
      await http.destroy();
    });
    return { monitor, readings: () => last };
  }

  async function fake(metrics: string): Promise<FakeEngine> {
    const engine = await startFakeEngine({ metrics });
    stops.push(() => engine.close());
    return engine;
  }

  it("reads vLLM and SGLang gauges, summing waiting and taking the fullest KV use", async () => {
    const vllm = await fake('vllm:num_requests_waiting{engine="0"} 2\nvllm:num_requests_waiting{engine="1"} 1\nvllm:kv_cache_usage_perc{engine="0"} 0.3\nvllm:kv_cache_usage_perc{engine="1"} 0.6\n');
    const sglang = await fake("sglang:num_queue_reqs 4\nsglang:token_usage 0.75\n");
    const bare = await fake("# nothing we know\n");
    const { monitor, readings } = await monitorOf([
      { id: "v", url: vllm.url, kind: "vllm" },
      { id: "s", url: sglang.url, kind: "sglang" },
      { id: "b", url: bare.url, kind: "vllm" },
    ]);
    await monitor.refresh();
    expect(readings()).toEqual([
      { id: "v", healthy: true, waiting: 3, kvUsage: 0.6 },
      { id: "s", healthy: true, waiting: 4, kvUsage: 0.75 },
      { id: "b", healthy: true, waiting: 0, kvUsage: 0 },
    ]);
  });

  it("marks an engine unhealthy after consecutive failed probes and healthy again on success", async () => {
    const engine = await fake("vllm:num_requests_waiting 1\n");
    const { monitor, readings } = await monitorOf([{ id: "e", url: engine.url, kind: "vllm" }]);
    engine.setHealthy(false);
    await monitor.refresh();
    expect(readings()[0]?.healthy).toBe(true);
    await monitor.refresh();
    expect(readings()[0]?.healthy).toBe(false);
    engine.setHealthy(true);
    await monitor.refresh();
    expect(readings()[0]?.healthy).toBe(true);
  });

  it("re-reads only the metrics of an engine whose metrics say saturated, at the short period, until they no longer do", async () => {
    const backedUp = await fake("vllm:num_requests_waiting 9\n");
    const idle = await fake("vllm:num_requests_waiting 0\n");
    const { monitor, readings } = await monitorOf(
      [
        { id: "backed-up", url: backedUp.url, kind: "vllm" },
        { id: "idle", url: idle.url, kind: "vllm" },
      ],
      { settings: { maxEngineWaiting: 4, maxKvUsage: 0.8 }, intervalMs: 10 },
    );
    await monitor.refresh();
    monitor.start();
    // The normal period is 10 s: only the short one can bring these reads.
    await waitFor(() => backedUp.probes().metrics >= 4, "saturated engine's metrics re-read");
    expect(backedUp.probes().health).toBe(1);
    expect(idle.probes()).toEqual({ health: 1, metrics: 1 });

    backedUp.setMetrics("vllm:num_requests_waiting 0\n");
    await waitFor(() => readings()[0]?.waiting === 0, "reading of the drained engine");
    const afterDrain = backedUp.probes();
    // Back on the normal period: several short periods bring no further read.
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(backedUp.probes()).toEqual(afterDrain);
    expect(idle.probes()).toEqual({ health: 1, metrics: 1 });
  });

  it("takes an engine out at once on markDown, and reports an unreachable one unhealthy", async () => {
    const engine = await fake("");
    const { monitor } = await monitorOf([
      { id: "e", url: engine.url, kind: "vllm" },
      { id: "dead", url: await refusedUrl(), kind: "vllm" },
    ]);
    monitor.markDown("e");
    expect(monitor.readings()[0]?.healthy).toBe(false);
    await monitor.refresh();
    await monitor.refresh();
    expect(monitor.readings().map((r) => r.healthy)).toEqual([true, false]);
  });
});
