import { type Dispatcher, fetch } from "undici";
import type { EngineRetentionHint } from "../core/kv/retention-planner.js";
import { KV_RETENTION_PATH, KvRetentionAccepted, type KvRetentionBatch, type KvRetentionHint, MAX_KV_RETENTION_HINTS } from "../protocol/kv-retention.js";
import type { RetentionHintMode } from "./config.js";
import type { PoolMetrics, RetentionHintOutcome } from "./metrics.js";

/*
 * Delivers the retention planner's hints (core/kv/retention-planner.ts) to the engines
 * configured to take them (`retentionHints: "agentix"`), one batch per engine per round,
 * POSTed to KV_RETENTION_PATH. Fire and forget: a hint is advice, so a slow, failing or
 * unknowing engine never delays or fails a call; each outcome is counted in /metrics.
 * Hints for engines without the mode are counted as unsupported and not sent.
 */

/** An engine that does not answer a hint batch within this long is given up on. */
export const KV_RETENTION_TIMEOUT_MS = 2_000;

export interface RetentionEngine {
  id: string;
  url: string;
  apiKey?: string | undefined;
  retentionHints: RetentionHintMode;
}

/** Statuses by which an engine says it has no such route: counted as unsupported, not as failures. */
const NO_ROUTE = new Set([404, 405, 501]);

export class KvRetentionRelay {
  readonly #engines: ReadonlyMap<string, RetentionEngine>;
  readonly #http: Dispatcher;
  readonly #metrics: PoolMetrics;
  readonly #pending = new Set<Promise<void>>();
  /** Engines whose last delivery failed: logged once per failing spell, not per batch. */
  readonly #failing = new Set<string>();

  constructor(options: { engines: readonly RetentionEngine[]; http: Dispatcher; metrics: PoolMetrics }) {
    this.#engines = new Map(options.engines.map((engine) => [engine.id, engine]));
    this.#http = options.http;
    this.#metrics = options.metrics;
  }

  /** Whether the engine takes hints (and so its calls' bodies carry their context tag). */
  takesHints(engineId: string): boolean {
    return this.#engines.get(engineId)?.retentionHints === "agentix";
  }

  /** Sends `hints`, grouped by engine, without waiting. */
  send(hints: readonly EngineRetentionHint[]): void {
    if (hints.length === 0) return;
    const byEngine = new Map<string, KvRetentionHint[]>();
    for (const { engineId, hint } of hints) {
      if (!this.takesHints(engineId)) {
        this.#count(engineId, [hint], "unsupported");
        continue;
      }
      let batch = byEngine.get(engineId);
      if (batch === undefined) byEngine.set(engineId, (batch = []));
      batch.push(hint);
    }
    for (const [engineId, batch] of byEngine) {
      const engine = this.#engines.get(engineId);
      if (engine === undefined) continue;
      for (let i = 0; i < batch.length; i += MAX_KV_RETENTION_HINTS) this.#track(this.#deliver(engine, batch.slice(i, i + MAX_KV_RETENTION_HINTS)));
    }
  }

  /** Resolves once every delivery started so far has ended (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.#pending.size > 0) await Promise.all([...this.#pending]);
  }

  #track(delivery: Promise<void>): void {
    this.#pending.add(delivery);
    void delivery.finally(() => this.#pending.delete(delivery));
  }

  async #deliver(engine: RetentionEngine, hints: KvRetentionHint[]): Promise<void> {
    const body: KvRetentionBatch = { hints };
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (engine.apiKey) headers.authorization = `Bearer ${engine.apiKey}`;
    try {
      const res = await fetch(`${engine.url}${KV_RETENTION_PATH}`, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        dispatcher: this.#http,
        signal: AbortSignal.timeout(KV_RETENTION_TIMEOUT_MS),
      });
      const text = await res.text();
      if (NO_ROUTE.has(res.status)) {
        this.#count(engine.id, hints, "unsupported");
        this.#failed(engine.id, `answered ${res.status}: it takes no retention hints (set retentionHints "none")`);
        return;
      }
      if (!res.ok) throw new Error(`answered ${res.status}: ${text.slice(0, 200)}`);
      this.#count(engine.id, hints, "sent");
      this.#failing.delete(engine.id);
      const accepted = KvRetentionAccepted.safeParse(parseJson(text));
      if (accepted.success) this.#metrics.kvRetentionApplied.inc({ engine: engine.id }, Math.min(accepted.data.applied, hints.length));
    } catch (error) {
      this.#count(engine.id, hints, "failed");
      this.#failed(engine.id, error instanceof Error ? error.message : String(error));
    }
  }

  #count(engineId: string, hints: readonly KvRetentionHint[], outcome: RetentionHintOutcome): void {
    // Cells bound once per engine, action and outcome (metrics.ts): prom-client's labelled inc() builds and checks a label string each time.
    const meters = this.#metrics.engine(engineId);
    for (const hint of hints) meters.retentionHints(hint.action, outcome).inc();
  }

  #failed(engineId: string, reason: string): void {
    if (this.#failing.has(engineId)) return;
    this.#failing.add(engineId);
    console.warn(`agentix pool: KV retention hints to engine ${engineId} failed (${reason}); calls are not affected`);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
