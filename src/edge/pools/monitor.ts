import { DurableObject } from "cloudflare:workers";
import { loadPerHealthyEngine, type PoolStatus } from "../../protocol/pool-status.js";
import { readPoolStatus } from "../chat/pool-client.js";
import { database } from "../db/client.js";
import type { Pool } from "../db/schema.js";
import { edgeConfig, type Env, signingKeyFor } from "../env.js";
import { readPools } from "./directory.js";

/** One pool's last status reading, as the monitor took it. */
export interface PoolStatusReading {
  /** When the reading was taken (edge clock, ms). */
  readAt: number;
  /** The pool answered and said an engine is healthy. */
  healthy: boolean;
  /** Calls queued and running per healthy engine (0 when none is healthy). */
  load: number;
  /** Why the read failed (unreachable, refused, no key); absent when the pool answered. */
  error?: string;
  /** The pool's own answer, when it gave one. */
  status?: PoolStatus;
}

/** The directory and the last readings, as every isolate reads them. */
export interface PoolSnapshot {
  pools: Pool[];
  readings: Record<string, PoolStatusReading>;
  /** When the directory was last read from D1 (ms). */
  directoryAt: number;
}

/** The monitor stops reading pools this long after the last snapshot anyone asked for. */
export const MONITOR_IDLE_STOP_MS = 10 * 60_000;

/** A status answer as a reading: load per healthy engine, so pools of any size compare. */
export function readingOf(status: PoolStatus, readAt: number): PoolStatusReading {
  const healthyEngines = status.engines.healthy;
  const load = loadPerHealthyEngine(status.queue.queued, status.queue.running, healthyEngines);
  return { readAt, healthy: status.status === "ok" && healthyEngines > 0, load, status };
}

const failedReading = (readAt: number, error: string): PoolStatusReading => ({ readAt, healthy: false, load: 0, error });

/**
 * One object (`idFromName("pools")`) that reads every pool's signed `/v1/status` on
 * its alarm, every POOL_STATUS_INTERVAL_MS, and keeps the directory (D1's `pools`
 * table, re-read each round and on `refresh`) beside the readings. Isolates ask it
 * for a snapshot and keep that about a second (directory-cache.ts), so the hot path
 * pays one RPC per isolate per second, not one D1 query and N status reads per call.
 *
 * State is memory only: an evicted object starts with no readings and takes a round
 * to have them again (unknown pools count as healthy and idle meanwhile). The alarm
 * runs while someone asks: MONITOR_IDLE_STOP_MS after the last snapshot it stops,
 * and the next snapshot starts it again.
 */
export class PoolMonitor extends DurableObject<Env> {
  #pools: Pool[] | undefined;
  #directoryAt = 0;
  readonly #readings = new Map<string, PoolStatusReading>();
  #lastAskedAt = 0;

  /** The directory and readings; starts the reading rounds if they had stopped. */
  async snapshot(): Promise<PoolSnapshot> {
    const now = Date.now();
    this.#lastAskedAt = now;
    if (this.#pools === undefined) await this.#readDirectory(now);
    // The first round one interval from now: until then every pool counts as healthy and idle, and
    // the load each answer states steers the isolate that got it.
    if ((await this.ctx.storage.getAlarm()) === null) await this.ctx.storage.setAlarm(now + edgeConfig(this.env).poolStatusIntervalMs);
    return this.#snapshot();
  }

  /** Re-reads the directory now (after an admin change), and answers the new snapshot. */
  async refresh(): Promise<PoolSnapshot> {
    await this.#readDirectory(Date.now());
    return this.#snapshot();
  }

  /** One round: the directory from D1, then every serving pool's status, concurrently. */
  override async alarm(): Promise<void> {
    const started = Date.now();
    const config = edgeConfig(this.env);
    try {
      await this.#readDirectory(started);
      await Promise.all((this.#pools ?? []).filter((pool) => pool.status !== "disabled").map((pool) => this.#read(pool)));
    } finally {
      if (Date.now() - this.#lastAskedAt < MONITOR_IDLE_STOP_MS) {
        await this.ctx.storage.setAlarm(started + config.poolStatusIntervalMs);
      }
    }
  }

  async #readDirectory(now: number): Promise<void> {
    const pools = await readPools(database(this.env.DB));
    this.#pools = pools;
    this.#directoryAt = now;
    const ids = new Set(pools.map((pool) => pool.id));
    for (const id of this.#readings.keys()) if (!ids.has(id)) this.#readings.delete(id);
  }

  async #read(pool: Pool): Promise<void> {
    const key = signingKeyFor(edgeConfig(this.env), pool.signingKeyId);
    const now = Date.now();
    if (key === undefined) {
      this.#readings.set(pool.id, failedReading(now, `the edge holds no signing key ${pool.signingKeyId}`));
      return;
    }
    try {
      const status = await readPoolStatus({ poolUrl: pool.url, signingKey: key }, now);
      this.#readings.set(pool.id, readingOf(status, Date.now()));
    } catch (error) {
      this.#readings.set(pool.id, failedReading(Date.now(), error instanceof Error ? error.message.slice(0, 200) : String(error)));
    }
  }

  #snapshot(): PoolSnapshot {
    return { pools: this.#pools ?? [], readings: Object.fromEntries(this.#readings), directoryAt: this.#directoryAt };
  }
}
