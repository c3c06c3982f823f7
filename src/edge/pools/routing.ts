import type { SigningKey } from "../../protocol/signing.js";
import type { Pool } from "../db/schema.js";
import { type EdgeConfig, signingKeyFor } from "../env.js";
import { CircuitBreaker } from "./circuit-breaker.js";
import { eligiblePools, type ModelAccess, type ServingStatus } from "./directory.js";
import type { PoolSnapshot } from "./monitor.js";
import { choosePools, type PoolChoiceReason, type PoolReading, regionOrderFor } from "./pool-choice.js";

/*
 * The edge's routing, per isolate: the directory and readings from the monitor's
 * snapshot, the choice from pool-choice.ts, and one circuit breaker per pool in the
 * isolate's memory (each isolate learns a dead pool from its own failures; the
 * monitor's readings tell all of them within a round).
 */

/** A pool a call may be sent to, with the key its requests are signed with. */
export interface RoutedPool {
  id: string;
  region: string;
  url: string;
  signingKey: SigningKey;
}

export interface PoolRoute {
  /** Where the call goes first, then the failover order; empty: no pool can take it. */
  pools: RoutedPool[];
  reason: PoolChoiceReason;
}

const breakers = new Map<string, CircuitBreaker>();

/** The isolate's breaker for a pool. */
export function breakerOf(poolId: string): CircuitBreaker {
  let breaker = breakers.get(poolId);
  if (breaker === undefined) {
    breaker = new CircuitBreaker();
    breakers.set(poolId, breaker);
  }
  return breaker;
}

/** A reading older than this many status rounds is not used: the pool counts as unknown (healthy, idle). */
export const READING_MAX_AGE_ROUNDS = 3;

/** The pools that may serve `model` for this tenant (404 `model_not_found` when none). */
export function poolsForModel(snapshot: PoolSnapshot, access: ModelAccess, model: string): (Pool & { status: ServingStatus })[] {
  return eligiblePools(snapshot.pools, access, model);
}

/** The load each pool stated with its last answer to this isolate (x-agentix-pool-load). */
const answeredLoads = new Map<string, { load: number; at: number }>();

/**
 * A pool answered a call and stated its load: newer than the monitor's reading until
 * the next round, and proof that it serves (fresher than a reading that said not).
 */
export function noteAnsweredLoad(poolId: string, load: number, at: number): void {
  answeredLoads.set(poolId, { load, at });
}

/** The readings still young enough to steer by: the monitor's, or a pool's own answer when newer. */
function currentReadings(snapshot: PoolSnapshot, config: EdgeConfig, now: number): Map<string, PoolReading> {
  const maxAgeMs = READING_MAX_AGE_ROUNDS * config.poolStatusIntervalMs;
  const readings = new Map<string, PoolReading>();
  for (const [id, reading] of Object.entries(snapshot.readings)) {
    if (now - reading.readAt <= maxAgeMs) readings.set(id, { healthy: reading.healthy, load: reading.load });
  }
  for (const [id, answered] of answeredLoads) {
    if (now - answered.at > maxAgeMs) {
      answeredLoads.delete(id);
      continue;
    }
    const monitored = snapshot.readings[id];
    if (monitored === undefined || monitored.readAt < answered.at) readings.set(id, { healthy: true, load: answered.load });
  }
  return readings;
}

const warnedMissingKeys = new Set<string>();

/**
 * The order to try pools for one call: `eligible` (poolsForModel) ranked by
 * choosePools. Pools whose signing key the edge does not hold are left out (and
 * logged once per isolate: a deployment fault). When the readings rule out every
 * pool, the choice is made again without them (breakers still apply): a monitor
 * that cannot read the pools must not stop traffic that would get through.
 */
export function routeCall(input: {
  eligible: readonly (Pool & { status: ServingStatus })[];
  snapshot: PoolSnapshot;
  config: EdgeConfig;
  currentPoolId: string | undefined;
  continent: string | undefined;
  now: number;
}): PoolRoute {
  const keyed = new Map<string, RoutedPool>();
  for (const pool of input.eligible) {
    const signingKey = signingKeyFor(input.config, pool.signingKeyId);
    if (signingKey === undefined) {
      if (!warnedMissingKeys.has(pool.signingKeyId)) {
        warnedMissingKeys.add(pool.signingKeyId);
        console.error(
          `Pool ${pool.id} names signing key ${pool.signingKeyId}, which the edge does not hold: add it to POOL_SIGNING_KEYS. The pool is skipped.`,
        );
      }
      continue;
    }
    keyed.set(pool.id, { id: pool.id, region: pool.region, url: pool.url, signingKey });
  }
  const options = input.eligible.filter((pool) => keyed.has(pool.id));
  const choice = {
    options,
    currentPoolId: input.currentPoolId,
    regionOrder: regionOrderFor(input.config.regionOrder, input.continent),
    allowed: (id: string) => breakerOf(id).available(input.now),
  };
  let chosen = choosePools({ ...choice, readings: currentReadings(input.snapshot, input.config, input.now) });
  if (chosen.pools.length === 0) chosen = choosePools({ ...choice, readings: new Map() });
  return { pools: chosen.pools.map((pool) => keyed.get(pool.id)).filter((p): p is RoutedPool => p !== undefined), reason: chosen.reason };
}

/** The program's pool, for its tool events: where its calls go, if the directory still has it serving. */
export function programPool(snapshot: PoolSnapshot, config: EdgeConfig, poolId: string): RoutedPool | undefined {
  if (poolId === "") return undefined;
  const pool = snapshot.pools.find((p) => p.id === poolId && p.status !== "disabled");
  if (pool === undefined) return undefined;
  const signingKey = signingKeyFor(config, pool.signingKeyId);
  return signingKey === undefined ? undefined : { id: pool.id, region: pool.region, url: pool.url, signingKey };
}
