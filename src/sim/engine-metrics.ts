import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineEvent, EngineModel, EngineStats } from "./engine-model.js";

/*
 * vLLM V1's Prometheus exposition (vllm/v1/metrics/loggers.py): the same names,
 * labels {model_name, engine} and buckets. Python's client writes counters with a
 * `_total` suffix and prom-client adds none, so the suffix is part of our names.
 * Each engine has its own Registry: several engines share one process in tests and
 * in the local stack. Times are model seconds (what the simulated GPU took).
 */

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
  160.0, 640.0, 2560.0,
];
const TPOT_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
const REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
  1920.0, 7680.0,
];

type CounterStat =
  | "prefixCacheQueries"
  | "prefixCacheHits"
  | "preemptions"
  | "promptTokens"
  | "generationTokens"
  | "hostHitTokens"
  | "recomputedTokens"
  | "hostLoadBytes"
  | "hostStoreBytes"
  | "keepsApplied"
  | "normalsApplied"
  | "dropsApplied"
  | "remoteKvPulledTokens"
  | "remoteKvRecomputedTokens";

export interface EngineMetrics {
  readonly registry: Registry;
  /** Feed every model event (histograms and request counters). */
  observe(event: EngineEvent): void;
  /** The exposition text and its content type. */
  render(): Promise<{ body: string; contentType: string }>;
}

export function createEngineMetrics(model: EngineModel, modelName: string, engineIndex = "0"): EngineMetrics {
  const registry = new Registry();
  const labels = { model_name: modelName, engine: engineIndex };
  const labelNames = ["model_name", "engine"] as const;

  const gauge = (name: string, help: string, read: (s: EngineStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        this.set(labels, read(model.stats()));
      },
    });
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.", (s) => s.running);
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", (s) => s.waiting);
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", (s) => s.kvUsage);

  // Counters mirror the model's running totals: each scrape adds what grew since the last.
  const counter = (name: string, help: string, stat: CounterStat) => {
    let reported = 0;
    return new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        const total = model.stats()[stat];
        // inc(0) on the first scrape makes the series appear before anything happened.
        this.inc(labels, Math.max(0, total - reported));
        reported = Math.max(reported, total);
      },
    });
  };
  counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", "prefixCacheQueries");
  counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", "prefixCacheHits");
  counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", "preemptions");
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "promptTokens");
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.", "generationTokens");
  // Issue 13's host KV tier and retention hints: no vLLM counterpart, so Agentix's own names.
  counter("agentix:kv_host_hit_tokens_total", "Prompt tokens reloaded from the node's host KV tier instead of computed.", "hostHitTokens");
  counter("agentix:kv_recomputed_tokens_total", "Prompt tokens computed whose KV the node had computed before.", "recomputedTokens");
  counter("agentix:kv_host_load_bytes_total", "KV bytes reloaded from the host tier over PCIe.", "hostLoadBytes");
  counter("agentix:kv_host_store_bytes_total", "KV bytes of evicted blocks written to the host tier over PCIe.", "hostStoreBytes");
  counter("agentix:kv_retention_keeps_applied_total", "Keep hints that named a context the engine holds.", "keepsApplied");
  counter("agentix:kv_retention_normals_applied_total", "Normal hints that named a context the engine holds.", "normalsApplied");
  counter("agentix:kv_retention_drops_applied_total", "Drop hints that named a context the engine holds.", "dropsApplied");
  // Disaggregated decodes (kv_transfer_params with do_remote_prefill): KV pulled, and prompt tokens computed here all the same.
  counter("agentix:kv_remote_pulled_tokens_total", "Prompt tokens of a remote prefill's KV pulled into this engine.", "remoteKvPulledTokens");
  counter("agentix:kv_remote_recomputed_tokens_total", "Prompt tokens a remote-prefill decode computed here past its last one (a pull that came short or failed, a preemption).", "remoteKvRecomputedTokens");

  const requestSuccess = new Counter({
    name: "vllm:request_success_total",
    help: "Count of successfully processed requests.",
    labelNames: ["model_name", "engine", "finished_reason"] as const,
    registers: [registry],
  });
  const histogram = (name: string, help: string, buckets: number[]) =>
    new Histogram({ name, help, buckets, labelNames, registers: [registry] });
  const ttft = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS);
  // vLLM observes every inter-token gap; one observation of the request's mean gap is kept here.
  const tpot = histogram(
    "vllm:time_per_output_token_seconds",
    "Histogram of time per output token in seconds.",
    TPOT_BUCKETS,
  );
  const e2e = histogram(
    "vllm:e2e_request_latency_seconds",
    "Histogram of e2e request latency in seconds.",
    REQUEST_LATENCY_BUCKETS,
  );

  return {
    registry,
    observe(event) {
      if (event.type !== "finished") return;
      const { timing } = event;
      requestSuccess.inc({ ...labels, finished_reason: event.finishReason });
      ttft.observe(labels, timing.ttftMs / 1000);
      if (timing.tpotMs !== undefined) tpot.observe(labels, timing.tpotMs / 1000);
      e2e.observe(labels, timing.e2eMs / 1000);
    },
    async render() {
      return { body: await registry.metrics(), contentType: registry.contentType };
    },
  };
}
