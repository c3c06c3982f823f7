import type { Env } from "../env.js";
import type { PoolMonitor, PoolSnapshot } from "./monitor.js";

/*
 * The isolate's copy of the pool monitor's snapshot. Fresh for SNAPSHOT_FRESH_MS;
 * after that a request still uses it (up to SNAPSHOT_STALE_MS) while one refresh per
 * isolate runs in the background, so a call waits on the monitor only when the
 * isolate has no usable copy. Requests never share a promise (workerd forbids one
 * request awaiting another's I/O): each refresh is its own RPC, and a flag keeps
 * them to one at a time.
 */

export const SNAPSHOT_FRESH_MS = 1_000;
export const SNAPSHOT_STALE_MS = 30_000;

let copy: { snapshot: PoolSnapshot; fetchedAt: number } | undefined;
let refreshingSince: number | undefined;

/** The monitor: one object for the whole deployment. */
export function poolMonitor(env: Env): DurableObjectStub<PoolMonitor> {
  return env.POOL_MONITOR.get(env.POOL_MONITOR.idFromName("pools"));
}

async function fetchSnapshot(env: Env): Promise<PoolSnapshot> {
  const snapshot = await poolMonitor(env).snapshot();
  copy = { snapshot, fetchedAt: Date.now() };
  return snapshot;
}

/**
 * The directory and readings for this request. `background` keeps a refresh alive
 * past the response (ctx.waitUntil).
 */
export async function poolSnapshot(env: Env, background: (work: Promise<unknown>) => void): Promise<PoolSnapshot> {
  const now = Date.now();
  if (copy !== undefined && now - copy.fetchedAt < SNAPSHOT_FRESH_MS) return copy.snapshot;
  if (copy !== undefined && now - copy.fetchedAt < SNAPSHOT_STALE_MS) {
    if (refreshingSince === undefined || now - refreshingSince > SNAPSHOT_STALE_MS) {
      refreshingSince = now;
      background(
        fetchSnapshot(env)
          .catch((error: unknown) => console.error("refreshing the pool snapshot failed; using the last one", error))
          .finally(() => {
            refreshingSince = undefined;
          }),
      );
    }
    return copy.snapshot;
  }
  return fetchSnapshot(env);
}

/**
 * After an admin change: the monitor re-reads D1 and this isolate takes its answer
 * at once. Other isolates follow within SNAPSHOT_FRESH_MS (plus one RPC).
 */
export async function refreshPoolSnapshot(env: Env): Promise<void> {
  const snapshot = await poolMonitor(env).refresh();
  copy = { snapshot, fetchedAt: Date.now() };
}
