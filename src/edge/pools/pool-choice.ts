import { z } from "zod";

/*
 * Which pool a call goes to, and where it fails over (pure: the caller passes the
 * pools eligible for the call's model and the tenant's plan, their last status
 * readings and whether each one's circuit breaker lets a call through).
 *
 * - A program stays on its pool (its KV cache and its place in the queue live there),
 *   draining or not, unless the pool is unhealthy, its breaker is open, or it is much
 *   more loaded than the best alternative (load > overloadFactor × best + overloadMargin;
 *   for a program on an active pool, only active pools are alternatives).
 * - A new program (or one that must move) goes to an active pool (draining ones only
 *   after every active one: new programs avoid a draining pool at once), the nearest
 *   region first, and within it the least loaded pool for its weight.
 * - The rest follow in the same order: the failover list. Pools whose breaker is open,
 *   or whose last reading said no engine is healthy, are left out: an empty list is a
 *   503, never a call sent to a pool known to be down.
 */

export interface PoolOption {
  id: string;
  region: string;
  /** Disabled pools are not options at all. */
  status: "active" | "draining";
  /** > 0: a pool of weight 2 takes twice the load before it counts as equally loaded. */
  weight: number;
}

export interface PoolReading {
  healthy: boolean;
  /** Calls queued and running per healthy engine. */
  load: number;
}

export interface PoolChoiceSettings {
  overloadFactor: number;
  overloadMargin: number;
}

export const DEFAULT_POOL_CHOICE: PoolChoiceSettings = Object.freeze({ overloadFactor: 2, overloadMargin: 8 });

export interface PoolChoiceInput {
  options: readonly PoolOption[];
  /** The pool the program's last call went to. */
  currentPoolId?: string | undefined;
  /** Regions nearest the client first; regions not named rank after all named ones. */
  regionOrder: readonly string[];
  /** Last status reading per pool; a pool never read counts as healthy and idle. */
  readings: ReadonlyMap<string, PoolReading>;
  /** The pool's breaker lets a call through now. */
  allowed: (poolId: string) => boolean;
  settings?: PoolChoiceSettings;
}

export type PoolChoiceReason = "current" | "new_program" | "current_unusable" | "current_overloaded" | "current_not_eligible";

export interface PoolChoice {
  /** First: where the call goes; then the failover order. Empty: no usable pool. */
  pools: PoolOption[];
  reason: PoolChoiceReason;
}

export function choosePools(input: PoolChoiceInput): PoolChoice {
  const settings = input.settings ?? DEFAULT_POOL_CHOICE;
  const loadOf = (pool: PoolOption) => (input.readings.get(pool.id)?.load ?? 0) / pool.weight;
  const regionRank = (region: string) => {
    const i = input.regionOrder.indexOf(region);
    return i === -1 ? input.regionOrder.length : i;
  };
  const usable = input.options.filter((pool) => input.readings.get(pool.id)?.healthy !== false && input.allowed(pool.id));
  const ranked = [...usable].sort(
    (a, b) =>
      Number(a.status === "draining") - Number(b.status === "draining") ||
      regionRank(a.region) - regionRank(b.region) ||
      loadOf(a) - loadOf(b) ||
      (a.id < b.id ? -1 : a.id > b.id ? 1 : 0),
  );
  if (input.currentPoolId === undefined) return { pools: ranked, reason: "new_program" };

  const current = ranked.find((pool) => pool.id === input.currentPoolId);
  if (current === undefined) {
    const eligible = input.options.some((pool) => pool.id === input.currentPoolId);
    return { pools: ranked, reason: eligible ? "current_unusable" : "current_not_eligible" };
  }
  const others = ranked.filter((pool) => pool !== current);
  // Load never moves a program from an active pool onto a draining one: that pool is being emptied.
  const best = others.find((pool) => current.status === "draining" || pool.status === "active");
  if (best !== undefined && loadOf(current) > settings.overloadFactor * loadOf(best) + settings.overloadMargin) {
    return { pools: [...others, current], reason: "current_overloaded" };
  }
  return { pools: [current, ...others], reason: "current" };
}

/**
 * The region-distance table: for each client continent (Cloudflare's
 * `request.cf.continent`: AF, AN, AS, EU, NA, OC, SA), the regions nearest first.
 */
export const RegionOrderTable = z.partialRecord(z.enum(["AF", "AN", "AS", "EU", "NA", "OC", "SA"]), z.array(z.string().min(1)).min(1));
export type RegionOrderTable = z.infer<typeof RegionOrderTable>;

/** The client's region order: its continent's row, else (unknown continent, or no row) no preference. */
export function regionOrderFor(table: RegionOrderTable, continent: string | undefined): readonly string[] {
  if (continent === undefined) return [];
  return (table as Partial<Record<string, string[]>>)[continent] ?? [];
}
