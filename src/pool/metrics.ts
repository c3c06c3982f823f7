import {
  collectDefaultMetrics,
  Counter,
  type CounterConfiguration,
  Gauge,
  Histogram,
  type HistogramConfiguration,
  type LabelValues,
  Registry,
} from "prom-client";
import type { KvRetentionHint } from "../protocol/kv-retention.js";

/*
 * The pool's Prometheus series, on a registry of its own (several pools in one
 * process, as in tests, must not share counters). Gauges of live state read it at
 * scrape time through a source, so they can never go stale.
 *
 * The counters every call moves (calls, tokens, usage observations, dispatches) are
 * counted in cells bound to their label sets once per engine (EngineMeters): inc()
 * adds to a number, and the sums reach prom-client when it is scraped (its collect).
 * prom-client's own inc() builds a string of the labels and checks them on every
 * call, and its `labels()` children do the same.
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
  /** TAO reservations holding an engine slot now. */
  reservationsHeld?(): number;
  /** Programs the TAO plan left out for want of KV, held in the queue at the last pump. */
  heldPrograms?(): number;
  /** The readiness predictor's accuracy at call arrival, per evidence source. */
  readinessAccuracy?(): Readonly<Record<string, { count: number; meanAbsErrorMs: number }>>;
  /** Each engine's calibrated cache retention (cache-credit ledger), 0–1. */
  cacheRetention?(): readonly { engine: string; retention: number }[];
  /** Why the queue is held now (the last pump left calls waiting), or undefined. */
  holdReason?(): string | undefined;
  /** Each engine's role and the one it drains toward, if switching (issue 13). */
  engineRoles?(): readonly { engine: string; role: string; switchingTo: string | undefined }[];
  /** Admission's projection per engine (absent without admission). */
  admissionProjections?(): readonly { engine: string; kvTokens: number; stepMs: number | undefined }[];
}

export type RejectReason =
  | "missing_signature"
  | "invalid_signature"
  | "unknown_signing_key"
  | "stale_timestamp"
  | "replayed_call"
  | "replay_cache_full"
  | "invalid_request"
  | "model_not_found"
  | "body_too_large"
  | "queue_full"
  | "no_healthy_engine"
  | "shutting_down";

/** How a disaggregated call's handoff from its prefill engine to a decode engine went. */
export type SplitHandoffOutcome =
  /** The prefill engine said where its KV is; the decode engine was sent it. */
  | "handed_off"
  /** It answered without kv_transfer_params: the decode engine computed the prompt itself. */
  | "no_kv_transfer_params"
  /** The decode engine failed before its first byte: the call was sent again whole (or failed, with no retries left). */
  | "decode_failed"
  /** No decode engine was healthy: the call was sent again whole. */
  | "no_decode_engine";

/** What became of a KV retention hint (agentix_pool_kv_retention_hints_total's outcome). */
export type RetentionHintOutcome = "sent" | "unsupported" | "failed";

export const CALL_OUTCOMES = ["completed", "client_error", "engine_error", "aborted", "failed"] as const;
export type CallOutcome = (typeof CALL_OUTCOMES)[number];

/** One label set of a counter, bound once: inc() adds to a number that reaches the counter at its next scrape. */
export class CounterCell {
  pending = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}

  inc(by = 1): void {
    this.pending += by;
  }
}

/** The cells of one counter; it adds them in when scraped (countedBy). */
class CounterCells<T extends string> {
  readonly #cells: CounterCell[] = [];

  cell(labels: LabelValues<T> & Record<string, string>): CounterCell {
    const cell = new CounterCell(labels);
    this.#cells.push(cell);
    return cell;
  }

  flushInto(counter: Counter<T>): void {
    for (const cell of this.#cells) {
      if (cell.pending === 0) continue;
      counter.inc(cell.labels as LabelValues<T>, cell.pending);
      cell.pending = 0;
    }
  }
}

/** The cell under `key` in `cache`, made by `make` the first time (a label set bound once, then found by one Map lookup). */
function cachedCell(cache: Map<string, CounterCell>, key: string, make: () => CounterCell): CounterCell {
  let cell = cache.get(key);
  if (cell === undefined) {
    cell = make();
    cache.set(key, cell);
  }
  return cell;
}

/** A counter that takes its cells' sums at every scrape (and any inc() of its own as usual). */
function countedBy<T extends string>(cells: CounterCells<T>, config: CounterConfiguration<T>): Counter<T> {
  return new Counter<T>({
    ...config,
    collect() {
      cells.flushInto(this);
    },
  });
}

/** Values a histogram cell holds before it hands them over without a scrape (a pool nobody scrapes keeps no more). */
export const HISTOGRAM_CELL_VALUES = 1024;

/**
 * One label set of a histogram, bound once: observe() keeps the value, and the
 * histogram observes what its cells hold at its next scrape (its collect), or when a
 * cell holds HISTOGRAM_CELL_VALUES. prom-client's observe() checks the labels, builds
 * their key string and converts the bucket bound to a property key per value: 5 µs
 * at a call's end (p50, bench:hop's probes), where the pool's other work has taken the
 * caches since the last call; in a batch they stay warm.
 */
export class HistogramCell {
  readonly #values: number[] = [];

  constructor(
    readonly histogram: Histogram<string>,
    readonly labels: Readonly<Record<string, string>>,
  ) {}

  observe(value: number): void {
    // prom-client refuses a value that is not a finite number at observe(): so does the cell, at the same place.
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    this.#values.push(value);
    if (this.#values.length >= HISTOGRAM_CELL_VALUES) this.flush();
  }

  /** Hands the values held over to the histogram. */
  flush(): void {
    for (const value of this.#values) this.histogram.observe(this.labels, value);
    this.#values.length = 0;
  }
}

/** A histogram that takes its cells' values at every scrape (and any observe() of its own as usual). */
function observedBy<T extends string>(cells: HistogramCell[], config: HistogramConfiguration<T>): Histogram<T> {
  return new Histogram<T>({
    ...config,
    collect() {
      for (const cell of cells) cell.flush();
    },
  });
}

type Cells<K extends string> = Readonly<Record<K, CounterCell>>;

function cellsBy<K extends string>(keys: readonly K[], make: (key: K) => CounterCell): Cells<K> {
  return Object.fromEntries(keys.map((key) => [key, make(key)])) as Record<K, CounterCell>;
}

/** The per-call counters of one engine, bound once. */
export class EngineMeters {
  /** agentix_pool_calls_total by outcome. */
  readonly calls: Cells<CallOutcome>;
  /** agentix_pool_engine_tokens_total, prompt and completion, by outcome. */
  readonly promptTokens: Cells<CallOutcome>;
  readonly completionTokens: Cells<CallOutcome>;
  /** agentix_pool_cache_observations_total: a completed call's usage reported, or estimated. */
  readonly usageReported: CounterCell;
  readonly usageEstimated: CounterCell;
  /** agentix_pool_service_seconds of this engine. */
  readonly serviceSeconds: HistogramCell;
  readonly #dispatches = new Map<string, CounterCell>();
  readonly #dispatchCells: CounterCells<"engine" | "reason">;
  readonly #retentionHints = new Map<string, CounterCell>();
  readonly #retentionHintCells: CounterCells<"engine" | "action" | "outcome">;

  constructor(
    readonly engine: string,
    cells: {
      calls: CounterCells<"engine" | "outcome">;
      tokens: CounterCells<"engine" | "kind" | "outcome">;
      usage: CounterCells<"engine" | "usage">;
      dispatches: CounterCells<"engine" | "reason">;
      retentionHints: CounterCells<"engine" | "action" | "outcome">;
      serviceSeconds: (engine: string) => HistogramCell;
    },
  ) {
    this.calls = cellsBy(CALL_OUTCOMES, (outcome) => cells.calls.cell({ engine, outcome }));
    this.promptTokens = cellsBy(CALL_OUTCOMES, (outcome) => cells.tokens.cell({ engine, kind: "prompt", outcome }));
    this.completionTokens = cellsBy(CALL_OUTCOMES, (outcome) => cells.tokens.cell({ engine, kind: "completion", outcome }));
    this.usageReported = cells.usage.cell({ engine, usage: "reported" });
    this.usageEstimated = cells.usage.cell({ engine, usage: "estimated" });
    this.serviceSeconds = cells.serviceSeconds(engine);
    this.#dispatchCells = cells.dispatches;
    this.#retentionHintCells = cells.retentionHints;
  }

  /** agentix_pool_kv_retention_hints_total for this action and outcome (the planner makes hints at most calls' arrival and end). */
  retentionHints(action: KvRetentionHint["action"], outcome: RetentionHintOutcome): CounterCell {
    return cachedCell(this.#retentionHints, `${action} ${outcome}`, () => this.#retentionHintCells.cell({ engine: this.engine, action, outcome }));
  }

  /** agentix_pool_dispatches_total for this routing reason. */
  dispatched(reason: string): CounterCell {
    return cachedCell(this.#dispatches, reason, () => this.#dispatchCells.cell({ engine: this.engine, reason }));
  }
}

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
/** A plan takes microseconds to low milliseconds (bounded by the planner's state budget). */
const PLAN_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

export class PoolMetrics {
  readonly registry = new Registry();
  #source: PoolStateSource | undefined;
  readonly #cells = {
    calls: new CounterCells<"engine" | "outcome">(),
    tokens: new CounterCells<"engine" | "kind" | "outcome">(),
    usage: new CounterCells<"engine" | "usage">(),
    dispatches: new CounterCells<"engine" | "reason">(),
    retentionHints: new CounterCells<"engine" | "action" | "outcome">(),
    predictions: new CounterCells<"source">(),
    serviceSeconds: (engine: string): HistogramCell => this.#histogramCell(this.serviceSeconds, { engine }),
  };
  readonly #histogramCells: HistogramCell[] = [];
  readonly #predictions = new Map<string, CounterCell>();
  readonly #engines = new Map<string, EngineMeters>();

  readonly dispatches = countedBy(this.#cells.dispatches, {
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
    help: "Calls whose client went away, by stage (queued, running, or held_decode: prefilled and waiting for a decode engine).",
    labelNames: ["stage"] as const,
    registers: [this.registry],
  });
  readonly calls = countedBy(this.#cells.calls, {
    name: "agentix_pool_calls_total",
    help: "Finished engine calls by engine and outcome.",
    labelNames: ["engine", "outcome"] as const,
    registers: [this.registry],
  });
  readonly engineTokens = countedBy(this.#cells.tokens, {
    name: "agentix_pool_engine_tokens_total",
    help: "Tokens engines reported (usage) for finished calls, by engine, kind (prompt, completion) and call outcome: aborted and failed streams count what the engine had produced when they ended.",
    labelNames: ["engine", "kind", "outcome"] as const,
    registers: [this.registry],
  });
  readonly callsHeld = new Counter({
    name: "agentix_pool_calls_held_total",
    help: "Calls that could not go to an engine when they arrived and waited in the pool queue, by what held them (kv, step-time, count, engine-backlog, unhealthy).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly holdRounds = new Counter({
    name: "agentix_pool_admission_holds_total",
    help: "Dispatch rounds that ended with calls left waiting, by what held the next one.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly queueSeconds = observedBy(this.#histogramCells, {
    name: "agentix_pool_queue_seconds",
    help: "Time from enqueue to dispatch (the hold time of held calls).",
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });
  /** agentix_pool_queue_seconds, observed at every dispatch. */
  readonly queueWait = this.#histogramCell(this.queueSeconds, {});
  readonly serviceSeconds = observedBy(this.#histogramCells, {
    name: "agentix_pool_service_seconds",
    help: "Time from dispatch to the engine's last byte.",
    labelNames: ["engine"] as const,
    buckets: SECONDS_BUCKETS,
    registers: [this.registry],
  });

  // TAO (tool- and cache-aware placement) and its inputs.
  readonly taoPlans = new Counter({
    name: "agentix_pool_tao_plans_total",
    help: "TAO placement plans computed, by method (dp, or best-fit-decreasing).",
    labelNames: ["method"] as const,
    registers: [this.registry],
  });
  readonly taoPlannerFallbacks = new Counter({
    name: "agentix_pool_tao_planner_fallbacks_total",
    help: "TAO plans that fell back to best-fit-decreasing because the DP state space passed its budget.",
    registers: [this.registry],
  });
  readonly taoPlanErrors = new Counter({
    name: "agentix_pool_tao_plan_errors_total",
    help: "TAO planning failures; the pool routes every call with the routing rule until a plan succeeds.",
    registers: [this.registry],
  });
  readonly taoPlanSeconds = new Histogram({
    name: "agentix_pool_tao_plan_seconds",
    help: "Wall time of one TAO plan (snapshot and planner).",
    buckets: PLAN_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  readonly taoStaleEntries = new Counter({
    name: "agentix_pool_tao_stale_entries_total",
    help: "TAO plan entries skipped when re-validated against live state, by reason.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly taoReservations = new Counter({
    name: "agentix_pool_tao_reservations_total",
    help: "TAO reservations of an engine slot for a ready-soon program, by outcome (held, used, released, expired).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly readinessPredictions = countedBy(this.#cells.predictions, {
    name: "agentix_pool_readiness_predictions_total",
    help: "Readiness predictions made or renewed (call completed, tool event), by the evidence they rest on.",
    labelNames: ["source"] as const,
    registers: [this.registry],
  });
  readonly toolEvents = new Counter({
    name: "agentix_pool_tool_events_total",
    help: "Tool events received from the edge, by type and outcome (applied, or stale: the next call came first).",
    labelNames: ["type", "outcome"] as const,
    registers: [this.registry],
  });
  // Branch-aware KV retention (core/kv/retention-planner.ts, kv-retention-relay.ts).
  readonly kvRetentionHints = countedBy(this.#cells.retentionHints, {
    name: "agentix_pool_kv_retention_hints_total",
    help: "KV retention hints the planner made, by engine, action (keep, normal, drop) and outcome: sent (the engine took the batch), unsupported (the engine is configured without retentionHints, or answered that it has no such route), failed (unreachable, or another error).",
    labelNames: ["engine", "action", "outcome"] as const,
    registers: [this.registry],
  });
  readonly kvRetentionApplied = new Counter({
    name: "agentix_pool_kv_retention_hints_applied_total",
    help: "KV retention hints an engine applied (it held blocks of the context), as its answers counted them.",
    labelNames: ["engine"] as const,
    registers: [this.registry],
  });
  readonly kvHints = new Counter({
    name: "agentix_pool_kv_hints_total",
    help: "KV hints received from the edge (POST /v1/kv-hints), by type.",
    labelNames: ["type"] as const,
    registers: [this.registry],
  });
  readonly cacheObservations = countedBy(this.#cells.usage, {
    name: "agentix_pool_cache_observations_total",
    help: "Completed calls the cache-credit ledger observed, by engine and whether the engine reported usage.",
    labelNames: ["engine", "usage"] as const,
    registers: [this.registry],
  });

  readonly decodesHeld = new Counter({
    name: "agentix_pool_decodes_held_total",
    help: "Prefilled disaggregated calls whose decode waited because no decode engine admitted it, by what held it (kv, step-time, count, engine-backlog).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly splitHandoffs = new Counter({
    name: "agentix_pool_split_handoffs_total",
    help: "Disaggregated calls' handoffs from a prefill engine to a decode engine, by outcome.",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly roleSwitches = new Counter({
    name: "agentix_role_switches_total",
    help: "Engine role switches completed: a draining engine drained and took its new role; an overlapping one (it took the new role at once) saw its old role's last call leave.",
    labelNames: ["from", "to", "mode"] as const,
    registers: [this.registry],
  });

  readonly roleSwitchesStarted = new Counter({
    name: "agentix_pool_role_switches_started_total",
    help: "Engine role switches the controller started, by direction and mode (overlap: the new role at once; drain: nothing new until the engine is empty).",
    labelNames: ["from", "to", "mode"] as const,
    registers: [this.registry],
  });

  constructor() {
    const metrics = this;
    new Gauge({
      name: "agentix_pool_engine_role",
      help: "1 for each engine's current role; switching_to names the role it drains toward (empty when not switching).",
      labelNames: ["engine", "role", "switching_to"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { engine, role, switchingTo } of metrics.#source?.engineRoles?.() ?? []) this.set({ engine, role, switching_to: switchingTo ?? "" }, 1);
      },
    });
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
    const poolGauge = (name: string, help: string, read: (source: PoolStateSource | undefined) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read(metrics.#source));
        },
      });
    poolGauge("agentix_pool_tao_reservations_held", "TAO reservations holding an engine slot now.", (source) => source?.reservationsHeld?.() ?? 0);
    poolGauge(
      "agentix_pool_tao_held_programs",
      "Programs the TAO plan left out for want of KV, held in the queue (routed once overdue).",
      (source) => source?.heldPrograms?.() ?? 0,
    );
    new Gauge({
      name: "agentix_pool_admission_hold",
      help: "1 for the reason calls are held in the pool queue now (none when nothing waits).",
      labelNames: ["reason"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        const reason = metrics.#source?.holdReason?.();
        if (reason !== undefined) this.set({ reason }, 1);
      },
    });
    const projectionGauge = (name: string, help: string, read: (p: { kvTokens: number; stepMs: number | undefined }) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ["engine"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const projection of metrics.#source?.admissionProjections?.() ?? []) {
            const value = read(projection);
            if (value !== undefined) this.set({ engine: projection.engine }, value);
          }
        },
      });
    projectionGauge(
      "agentix_pool_engine_projected_kv_tokens",
      "KV tokens admission projects the engine's running calls to hold at their peak (own account + what the last scrape showed beyond it).",
      (p) => p.kvTokens,
    );
    projectionGauge(
      "agentix_pool_engine_projected_step_seconds",
      "Decode step time admission projects for the engine's current batch (engines with a decode cost model).",
      (p) => (p.stepMs === undefined ? undefined : p.stepMs / 1000),
    );
    const accuracyGauge = (name: string, help: string, read: (a: { count: number; meanAbsErrorMs: number }) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["source"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [source, accuracy] of Object.entries(metrics.#source?.readinessAccuracy?.() ?? {})) {
            if (accuracy.count > 0) this.set({ source }, read(accuracy));
          }
        },
      });
    accuracyGauge("agentix_pool_readiness_arrivals", "Calls that arrived with a readiness prediction in force, by its source.", (a) => a.count);
    accuracyGauge(
      "agentix_pool_readiness_mean_abs_error_seconds",
      "Mean |predicted − actual| arrival of those calls, by the prediction's source.",
      (a) => a.meanAbsErrorMs / 1000,
    );
    new Gauge({
      name: "agentix_pool_engine_cache_retention",
      help: "Share of predicted cache credit the engine's reported cached_tokens confirm (EWMA, 0–1).",
      labelNames: ["engine"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const { engine, retention } of metrics.#source?.cacheRetention?.() ?? []) this.set({ engine }, retention);
      },
    });
  }

  #histogramCell(histogram: Histogram<string>, labels: Readonly<Record<string, string>>): HistogramCell {
    const cell = new HistogramCell(histogram, labels);
    this.#histogramCells.push(cell);
    return cell;
  }

  observe(source: PoolStateSource): void {
    this.#source = source;
  }

  /**
   * Adds the process's own series (prom-client's defaults: CPU, memory, heap spaces,
   * event-loop lag, and `nodejs_gc_duration_seconds` by kind of collection), for the
   * pool that is its process's one (main.ts); a process holding several pools (tests)
   * does not. What the garbage collector costs the pool is then read in production as
   * `bench:proxy` reads it (issue 14's ninth pass).
   */
  includeProcessMetrics(): void {
    collectDefaultMetrics({ register: this.registry });
  }

  /** The engine's per-call counters, bound once. */
  engine(engineId: string): EngineMeters {
    let meters = this.#engines.get(engineId);
    if (meters === undefined) {
      meters = new EngineMeters(engineId, this.#cells);
      this.#engines.set(engineId, meters);
    }
    return meters;
  }

  /** agentix_pool_readiness_predictions_total for this evidence source (a prediction is renewed at most calls' end). */
  readinessPrediction(source: string): CounterCell {
    return cachedCell(this.#predictions, source, () => this.#cells.predictions.cell({ source }));
  }

  reject(reason: RejectReason): void {
    this.rejected.inc({ reason });
  }
}
