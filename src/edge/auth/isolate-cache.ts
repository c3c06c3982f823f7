import type { AuthenticatedTenant } from "../context.js";

/*
 * What one isolate remembers about keys, so a call goes straight to its tenant's
 * limiter. Neither map is ever trusted alone:
 * - A legacy key's tenant (keys issued before keys named their tenant): a key belongs to
 *   one tenant for ever, so this cannot go stale; the limiter still checks the key itself
 *   (revoked or not) on every request. One D1 read per isolate per legacy key.
 * - A verified key's profile and its version: a call is checked (body fields, model) against
 *   it before admission, and the admission, in the limiter, refuses a version that is not
 *   the current one (profile_changed, with the current profile) and a key that is no longer
 *   valid. Its effective staleness bound is therefore 0: no call is admitted on a stale copy.
 * Both are bounded: the oldest entry goes when a map is full.
 */

export const MAX_CACHED_KEYS = 10_000;

export interface CachedProfile {
  tenant: AuthenticatedTenant;
  version: number;
}

class BoundedMap<V> {
  readonly #entries = new Map<string, V>();
  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    return this.#entries.get(key);
  }

  set(key: string, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.max) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }

  delete(key: string): void {
    this.#entries.delete(key);
  }
}

/** Key hash → tenant ID, for keys whose text does not name their tenant. */
export const legacyKeyTenants = new BoundedMap<string>(MAX_CACHED_KEYS);
/** Key hash → the tenant profile the limiter last answered for it. */
export const verifiedProfiles = new BoundedMap<CachedProfile>(MAX_CACHED_KEYS);
