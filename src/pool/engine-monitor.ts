import { type Dispatcher, fetch } from "undici";
import type { EngineAdapter } from "./engines/adapter.js";
import { parsePrometheusText, valuesOf } from "./prometheus-text.js";

/*
 * Polls every engine's health endpoint and Prometheus metrics on a fixed period and
 * reports what it read. Health: a 2xx probe marks an engine healthy at once;
 * `unhealthyAfterFailures` failed probes in a row take it out of rotation (a relay
 * that cannot connect takes it out at once, through markDown). Metrics: a gauge the
 * engine does not expose reads as 0; a scrape that fails keeps the last reading, so a
 * slow /metrics does not make a busy engine look idle. Rounds never overlap: the next
 * is scheduled when one ends.
 */

export interface MonitoredEngine {
  id: string;
  url: string;
  apiKey?: string | undefined;
  healthPath: string;
  metricsPath?: string | undefined;
  adapter: EngineAdapter;
}

export interface EngineReading {
  id: string;
  healthy: boolean;
  waiting: number;
  kvUsage: number;
  /** KV-cache capacity in tokens, when the engine's metrics state it (vLLM cache_config_info, SGLang max_total_num_tokens). */
  kvCapacityTokens?: number;
}

export interface EngineMonitorOptions {
  engines: readonly MonitoredEngine[];
  http: Dispatcher;
  intervalMs: number;
  probeTimeoutMs: number;
  unhealthyAfterFailures: number;
  /** Called after every round with one reading per engine. */
  onReadings(readings: EngineReading[]): void;
}

interface ProbeState {
  engine: MonitoredEngine;
  failures: number;
  reading: EngineReading;
}

export class EngineMonitor {
  readonly #options: EngineMonitorOptions;
  readonly #states: ProbeState[];
  readonly #stop = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #round: Promise<void> | undefined;

  constructor(options: EngineMonitorOptions) {
    this.#options = options;
    // Optimistic until the first probe: a dead engine is found by that probe or by the first relay.
    this.#states = options.engines.map((engine) => ({
      engine,
      failures: 0,
      reading: { id: engine.id, healthy: true, waiting: 0, kvUsage: 0 },
    }));
  }

  /** Starts the periodic rounds. */
  start(): void {
    if (this.#stop.signal.aborted || this.#timer !== undefined) return;
    this.#schedule();
  }

  /** Runs one round now (joins the one in progress, if any). */
  refresh(): Promise<void> {
    this.#round ??= this.#probeAll().finally(() => {
      this.#round = undefined;
    });
    return this.#round;
  }

  /** An engine the relay could not reach: out of rotation until a probe succeeds. */
  markDown(engineId: string): void {
    const state = this.#states.find((s) => s.engine.id === engineId);
    if (state === undefined) return;
    state.failures = Math.max(state.failures, this.#options.unhealthyAfterFailures);
    state.reading = { ...state.reading, healthy: false };
  }

  readings(): EngineReading[] {
    return this.#states.map((s) => ({ ...s.reading }));
  }

  async stop(): Promise<void> {
    this.#stop.abort(new Error("engine monitor stopped"));
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#round;
  }

  #schedule(): void {
    if (this.#stop.signal.aborted) return;
    this.#timer = setTimeout(() => {
      void this.refresh().finally(() => this.#schedule());
    }, this.#options.intervalMs);
  }

  async #probeAll(): Promise<void> {
    if (this.#stop.signal.aborted) return;
    await Promise.all(this.#states.map((state) => this.#probe(state)));
    if (this.#stop.signal.aborted) return;
    this.#options.onReadings(this.readings());
  }

  async #probe(state: ProbeState): Promise<void> {
    const { engine } = state;
    const [healthy, gauges] = await Promise.all([
      this.#get(engine, engine.healthPath).then((res) => res !== undefined),
      engine.metricsPath === undefined ? Promise.resolve(undefined) : this.#get(engine, engine.metricsPath),
    ]);
    state.failures = healthy ? 0 : state.failures + 1;
    const next = { ...state.reading, healthy: healthy || (state.reading.healthy && state.failures < this.#options.unhealthyAfterFailures) };
    if (gauges !== undefined) {
      const samples = parsePrometheusText(gauges);
      // Several series (one per model or data-parallel rank): waiting adds up, KV use is the fullest.
      next.waiting = valuesOf(samples, engine.adapter.metricNames.waiting).reduce((sum, v) => sum + v, 0);
      next.kvUsage = Math.max(0, ...valuesOf(samples, engine.adapter.metricNames.kvUsage));
      const capacity = engine.adapter.kvCapacityTokens?.(samples);
      if (capacity !== undefined && Number.isFinite(capacity)) next.kvCapacityTokens = capacity;
    }
    state.reading = next;
  }

  /** The body of a 2xx answer, or undefined for any failure. */
  async #get(engine: MonitoredEngine, path: string): Promise<string | undefined> {
    const signal = AbortSignal.any([this.#stop.signal, AbortSignal.timeout(this.#options.probeTimeoutMs)]);
    try {
      const res = await fetch(`${engine.url}${path}`, {
        headers: engine.apiKey ? { authorization: `Bearer ${engine.apiKey}` } : {},
        signal,
        dispatcher: this.#options.http,
      });
      const body = await res.text();
      return res.ok ? body : undefined;
    } catch {
      return undefined;
    }
  }
}
