import { Counter, Gauge, Histogram, Registry } from "prom-client";

/*
 * The pool's Prometheus series, on a registry of its own (several pools in one
 * process, as in tests, must not share counters). Gauges of live state read it at
 * scrape time through a source, so they can never go stale.
 */

export interface EngineGaugeState {
  id: string;
  healthy: boolean;
  inFlight: number;
  waiting: number;
  kvUsage: number;
}

export interface PoolStateSource {
  depthByLevel(): number[];
  engineStates(): readonly EngineGaugeState[];
}

export type RejectReason =
  | "missing_signature"
  | "invalid_signature"
  | "stale_timestamp"
  | "replayed_call"
  | "replay_cache_full"
  | "invalid_request"
  | "body_too_large"
  | "queue_full"
  | "no_healthy_engine"
  | "shutting_down";

export type CallOutcome = "completed" | "client_error" | "engine_error" | "aborted" | "failed";

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class PoolMetrics {
  readonly registry = new Registry();
  #source: PoolStateSource | undefined;

  readonly dispatches = new Counter({
    name: "agentix_pool_dispatches_total",
    help: "Calls sent to an engine, by engine and routing reason (retries included).",
    labelNames: ["engine", "reason"] as const,
    registers: [this.registry],
  });
  readonly promotions = new Counter({
    name: "agentix_pool_promotions_total",
    help: "Calls dispatched after anti-starvation promotion to the top level.",
    registers: [this.registry],
  });
  readonly retries = new Counter({
    name: "agentix_pool_retries_total",
    help: "Calls retried after an engine failed before its first byte, by failed engine.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly rejected = new Counter({
    name: "agentix_pool_rejected_requests_total",
    help: "Requests refused before queueing, by reason.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly cancelled = new Counter({
    name: "agentix_pool_cancelled_calls_total",
    help: "Calls whose client went away, by stage (queued or running).",
    labelNames: ["stage"] as const,
    registers: [this.registry],
  });
  readonly calls = new Counter({
    name: "agentix_pool_calls_total",
    help: "Finished engine calls by engine and outcome.",
    labelNames: ["engine", "outcome"] as const,
    registers: [this.registry],
  });
  readonly queueSeconds = new Histogram({
    name: "agentix_pool_queue_seconds",
    help: "Time from enqueue to dispatch.",
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly serviceSeconds = new Histogram({
    name: "agentix_pool_service_seconds",
    help: "Time from dispatch to the engine's last byte.",
    labelNames: ["engine"] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });

  constructor() {
    const metrics = this;
    new Gauge({
      name: "agentix_pool_queue_depth",
      help: "Calls waiting in the pool queue, by level (0 = highest priority).",
      labelNames: ["level"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        const depths = metrics.#source?.depthByLevel() ?? [];
        depths.forEach((depth, level) => this.set({ level: String(level) }, depth));
      },
    });
    const engineGauge = (name: string, help: string, read: (engine: EngineGaugeState) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["engine"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const engine of metrics.#source?.engineStates() ?? []) this.set({ engine: engine.id }, read(engine));
        },
      });
    engineGauge("agentix_pool_engine_in_flight", "Calls the pool has running on each engine.", (e) => e.inFlight);
    engineGauge("agentix_pool_engine_healthy", "1 when the engine passes its health probe.", (e) => (e.healthy ? 1 : 0));
    engineGauge("agentix_pool_engine_waiting", "Requests waiting inside the engine (from its /metrics).", (e) => e.waiting);
    engineGauge("agentix_pool_engine_kv_usage", "Engine KV-cache use, 0–1 (from its /metrics).", (e) => e.kvUsage);
  }

  observe(source: PoolStateSource): void {
    this.#source = source;
  }

  reject(reason: RejectReason): void {
    this.rejected.inc({ reason });
  }
}
