/*
 * Per-tenant decayed service for fair sharing inside a level. Service is charged
 * when a call completes and decays exponentially, so a tenant's heavy use a few
 * half-lives ago no longer counts against it:
 *   service(now) = service(t0) · 2^(-(now - t0) / halfLife)
 * A tenant's share is its decayed service divided by the plan weight last seen on one
 * of its calls (weight 2 = twice the service for the same share).
 */

export function decayed(valueMs: number, elapsedMs: number, halfLifeMs: number): number {
  // A clock that steps back (or a charge stamped in the past) never inflates service.
  if (elapsedMs <= 0 || valueMs === 0) return valueMs;
  return valueMs * Math.pow(2, -elapsedMs / halfLifeMs);
}

interface TenantRecord {
  weight: number;
  serviceMs: number;
  chargedAt: number;
  /** Calls of this tenant waiting in the queue. */
  queued: number;
}

export class TenantShares {
  readonly #tenants = new Map<string, TenantRecord>();

  constructor(private readonly halfLifeMs: number) {
    if (!(halfLifeMs > 0)) throw new RangeError(`tenantHalfLifeMs must be > 0, got ${halfLifeMs}`);
  }

  #record(tenantId: string): TenantRecord {
    let record = this.#tenants.get(tenantId);
    if (record === undefined) {
      record = { weight: 1, serviceMs: 0, chargedAt: Number.NEGATIVE_INFINITY, queued: 0 };
      this.#tenants.set(tenantId, record);
    }
    return record;
  }

  /** A call of the tenant entered the queue carrying this plan weight. */
  callQueued(tenantId: string, weight: number): void {
    const record = this.#record(tenantId);
    record.weight = weight;
    record.queued += 1;
  }

  callLeft(tenantId: string): void {
    const record = this.#tenants.get(tenantId);
    if (record !== undefined && record.queued > 0) record.queued -= 1;
  }

  charge(tenantId: string, serviceMs: number, now: number): void {
    if (typeof tenantId !== "string" || tenantId === "") throw new TypeError("tenantId must be a non-empty string");
    if (!Number.isFinite(serviceMs) || serviceMs < 0) {
      throw new RangeError(`charged service must be a finite number >= 0, got ${serviceMs}`);
    }
    if (!Number.isFinite(now)) throw new RangeError(`now must be finite, got ${now}`);
    const record = this.#record(tenantId);
    record.serviceMs = decayed(record.serviceMs, now - record.chargedAt, this.halfLifeMs) + serviceMs;
    record.chargedAt = Math.max(record.chargedAt, now);
  }

  serviceMs(tenantId: string, now: number): number {
    const record = this.#tenants.get(tenantId);
    if (record === undefined) return 0;
    return decayed(record.serviceMs, now - record.chargedAt, this.halfLifeMs);
  }

  share(tenantId: string, now: number): number {
    const record = this.#tenants.get(tenantId);
    if (record === undefined) return 0;
    return decayed(record.serviceMs, now - record.chargedAt, this.halfLifeMs) / record.weight;
  }

  /** Drops tenants with nothing queued whose decayed service fell below `belowMs`. */
  forgetIdle(now: number, belowMs: number): number {
    let forgotten = 0;
    for (const [tenantId, record] of this.#tenants) {
      if (record.queued === 0 && decayed(record.serviceMs, now - record.chargedAt, this.halfLifeMs) < belowMs) {
        this.#tenants.delete(tenantId);
        forgotten += 1;
      }
    }
    return forgotten;
  }

  get tenantCount(): number {
    return this.#tenants.size;
  }
}
