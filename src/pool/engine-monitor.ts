import { type Dispatcher, fetch } from "undici";
import { metricsSaturated, type SaturationSettings } from "../core/engines.js";
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
 *
 * Metrics over the saturation limits make the pool hold calls back from that engine
 * until a reading says otherwise, so such an engine's metrics (only them: health keeps
 * its period, and so its time to be taken out) are re-read at the short
 * `saturated.intervalMs`: a backlog the engine clears in one step (a burst caught
 * between two scheduler steps) would otherwise hold calls for a whole `intervalMs`.
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
  /**
   * Re-read the metrics of an engine whose last ones crossed these limits every
   * `intervalMs` of its own (shorter than the normal one). Unset: the normal period only.
   */
  saturated?: { settings: SaturationSettings; intervalMs: number };
  probeTimeoutMs: number;
  unhealthyAfterFailures: number;
  /** Called after every round with one reading per engine. */
  onReadings(readings: EngineReading[]): void;
}

interface ProbeState {
  engine: MonitoredEngine;
  failures: number;
  reading: EngineReading;
  /** performance.now() from which the periodic rounds probe this engine's health and metrics. */
  dueAt: number;
  /** From which they re-read its metrics alone: before `dueAt` only while they say saturated. */
  metricsDueAt: number;
}

/** A full probe (health and metrics) or a re-read of the metrics alone. */
type ProbeKind = "full" | "metrics";

/** Timers may fire a little before their nominal time on another clock; that still counts as due. */
const DUE_SLACK_MS = 1;

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
      dueAt: performance.now() + options.intervalMs,
      metricsDueAt: performance.now() + options.intervalMs,
    }));
  }

  /** Starts the periodic rounds. */
  start(): void {
    if (this.#stop.signal.aborted || this.#timer !== undefined) return;
    this.#schedule();
  }

  /** Runs one round of every engine now (joins the one in progress, if any). */
  refresh(): Promise<void> {
    return this.#run(new Map(this.#states.map((state) => [state, "full"])));
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

  #run(round: ReadonlyMap<ProbeState, ProbeKind>): Promise<void> {
    this.#round ??= this.#probeRound(round).finally(() => {
      this.#round = undefined;
    });
    return this.#round;
  }

  /** The next periodic round, when the first engine falls due; it probes what is due by then. */
  #schedule(): void {
    if (this.#stop.signal.aborted || this.#states.length === 0) return;
    const firstDue = Math.min(...this.#states.map((state) => Math.min(state.dueAt, state.metricsDueAt)));
    this.#timer = setTimeout(() => {
      const now = performance.now() + DUE_SLACK_MS;
      const round = new Map<ProbeState, ProbeKind>();
      for (const state of this.#states) {
        if (state.dueAt <= now) round.set(state, "full");
        else if (state.metricsDueAt <= now) round.set(state, "metrics");
      }
      // A timer that fired early (its clock lags this one), or a refresh that just read them all.
      if (round.size === 0) return this.#schedule();
      void this.#run(round).finally(() => this.#schedule());
    }, Math.max(0, firstDue - performance.now()));
  }

  async #probeRound(round: ReadonlyMap<ProbeState, ProbeKind>): Promise<void> {
    if (this.#stop.signal.aborted) return;
    await Promise.all([...round].map(([state, kind]) => this.#probe(state, kind)));
    if (this.#stop.signal.aborted) return;
    const now = performance.now();
    for (const [state, kind] of round) {
      if (kind === "full") state.dueAt = now + this.#options.intervalMs;
      state.metricsDueAt = this.#saturatedByMetrics(state.reading) ? now + this.#shortPeriod() : state.dueAt;
    }
    this.#options.onReadings(this.readings());
  }

  #shortPeriod(): number {
    const { intervalMs, saturated } = this.#options;
    return Math.min(saturated?.intervalMs ?? intervalMs, intervalMs);
  }

  #saturatedByMetrics(reading: EngineReading): boolean {
    const settings = this.#options.saturated?.settings;
    if (settings === undefined || !reading.healthy) return false;
    return metricsSaturated(reading, settings);
  }

  async #probe(state: ProbeState, kind: ProbeKind): Promise<void> {
    const { engine } = state;
    const [healthy, gauges] = await Promise.all([
      kind === "full" ? this.#get(engine, engine.healthPath).then((res) => res !== undefined) : Promise.resolve(undefined),
      engine.metricsPath === undefined ? Promise.resolve(undefined) : this.#get(engine, engine.metricsPath),
    ]);
    const next = { ...state.reading };
    if (healthy !== undefined) {
      state.failures = healthy ? 0 : state.failures + 1;
      next.healthy = healthy || (state.reading.healthy && state.failures < this.#options.unhealthyAfterFailures);
    }
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
