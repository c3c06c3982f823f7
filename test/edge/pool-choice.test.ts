import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/edge/pools/circuit-breaker.js";
import { choosePools, type PoolOption, type PoolReading, regionOrderFor, RegionOrderTable } from "../../src/edge/pools/pool-choice.js";

const pool = (id: string, region: string, extra: Partial<PoolOption> = {}): PoolOption => ({ id, region, status: "active", weight: 1, ...extra });
const readings = (entries: Record<string, PoolReading>) => new Map(Object.entries(entries));
const always = () => true;

const US1 = pool("us-1", "us-east");
const US2 = pool("us-2", "us-east");
const EU1 = pool("eu-1", "eu-west");
const ALL = [US1, US2, EU1];

describe("choosePools", () => {
  it("sends a new program to the nearest region's least-loaded pool, the others as failover", () => {
    const got = choosePools({ options: ALL, regionOrder: ["eu-west", "us-east"], readings: readings({}), allowed: always });
    expect(got.reason).toBe("new_program");
    expect(got.pools.map((p) => p.id)).toEqual(["eu-1", "us-1", "us-2"]);
    const us = choosePools({
      options: ALL,
      regionOrder: ["us-east", "eu-west"],
      readings: readings({ "us-1": { healthy: true, load: 5 }, "us-2": { healthy: true, load: 1 } }),
      allowed: always,
    });
    expect(us.pools.map((p) => p.id)).toEqual(["us-2", "us-1", "eu-1"]);
  });

  it("keeps a program on its pool, even a busier or draining one, until it is much more loaded", () => {
    const draining = { ...US1, status: "draining" as const };
    const options = [draining, US2, EU1];
    const base = { options, regionOrder: ["us-east"], allowed: always, currentPoolId: "us-1" };
    expect(choosePools({ ...base, readings: readings({ "us-1": { healthy: true, load: 10 }, "us-2": { healthy: true, load: 2 } }) })).toMatchObject({
      reason: "current",
      pools: [draining, US2, EU1],
    });
    // 2 × 2 + 8 = 12 < 13: it moves, and its old pool stays last in the failover list.
    const moved = choosePools({ ...base, readings: readings({ "us-1": { healthy: true, load: 13 }, "us-2": { healthy: true, load: 2 } }) });
    expect(moved.reason).toBe("current_overloaded");
    expect(moved.pools.map((p) => p.id)).toEqual(["us-2", "eu-1", "us-1"]);
  });

  it("never moves a program off an active pool onto a draining one for load", () => {
    const draining = { ...US2, status: "draining" as const };
    const got = choosePools({
      options: [US1, draining],
      currentPoolId: "us-1",
      regionOrder: [],
      readings: readings({ "us-1": { healthy: true, load: 100 }, "us-2": { healthy: true, load: 0 } }),
      allowed: always,
    });
    expect(got).toMatchObject({ reason: "current", pools: [US1, draining] });
  });

  it("puts a new program on a draining pool only after every active one", () => {
    const draining = { ...US1, status: "draining" as const };
    const got = choosePools({ options: [draining, EU1], regionOrder: ["us-east", "eu-west"], readings: readings({}), allowed: always });
    expect(got.pools.map((p) => p.id)).toEqual(["eu-1", "us-1"]);
  });

  it("leaves out pools that are unhealthy or whose breaker is open, and says why the program moved", () => {
    const got = choosePools({
      options: ALL,
      currentPoolId: "us-1",
      regionOrder: ["us-east"],
      readings: readings({ "us-1": { healthy: false, load: 0 } }),
      allowed: (id) => id !== "us-2",
    });
    expect(got).toMatchObject({ reason: "current_unusable", pools: [EU1] });
    const gone = choosePools({ options: [EU1], currentPoolId: "us-1", regionOrder: [], readings: readings({}), allowed: always });
    expect(gone.reason).toBe("current_not_eligible");
    expect(choosePools({ options: ALL, regionOrder: [], readings: readings({}), allowed: () => false }).pools).toEqual([]);
  });

  it("property: the list is exactly the usable options, once each; the current pool leads unless it had to move", () => {
    const arbPool = fc.record({
      id: fc.constantFrom("a", "b", "c", "d", "e"),
      region: fc.constantFrom("r1", "r2", "r3"),
      status: fc.constantFrom("active" as const, "draining" as const),
      weight: fc.double({ min: 0.5, max: 4, noNaN: true }),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(arbPool, { selector: (p) => p.id, maxLength: 5 }),
        fc.dictionary(fc.constantFrom("a", "b", "c", "d", "e"), fc.record({ healthy: fc.boolean(), load: fc.double({ min: 0, max: 100, noNaN: true }) })),
        fc.subarray(["a", "b", "c", "d", "e"]),
        fc.option(fc.constantFrom("a", "b", "c", "d", "e"), { nil: undefined }),
        fc.shuffledSubarray(["r1", "r2", "r3"]),
        (options, reads, open, currentPoolId, regionOrder) => {
          const got = choosePools({ options, currentPoolId, regionOrder, readings: new Map(Object.entries(reads)), allowed: (id) => !open.includes(id) });
          const usable = options.filter((p) => reads[p.id]?.healthy !== false && !open.includes(p.id));
          expect(new Set(got.pools.map((p) => p.id))).toEqual(new Set(usable.map((p) => p.id)));
          expect(got.pools).toHaveLength(usable.length);
          if (got.reason === "current") expect(got.pools[0]?.id).toBe(currentPoolId);
          if (currentPoolId !== undefined && usable.some((p) => p.id === currentPoolId) && got.reason !== "current") {
            expect(got.reason).toBe("current_overloaded");
          }
          if (got.reason !== "current") {
            // Whoever leads is active if any candidate is, and in the nearest region among those
            // (a program that moves for load moves to one of the others).
            const rank = (r: string) => (regionOrder.indexOf(r) === -1 ? regionOrder.length : regionOrder.indexOf(r));
            const candidates = got.reason === "current_overloaded" ? usable.filter((p) => p.id !== currentPoolId) : usable;
            const active = candidates.filter((p) => p.status === "active");
            const nearest = Math.min(...(active.length > 0 ? active : candidates).map((p) => rank(p.region)));
            if (active.length > 0) expect(got.pools[0]?.status).toBe("active");
            if (got.pools[0] !== undefined) expect(rank(got.pools[0].region)).toBe(nearest);
          }
        },
      ),
    );
  });
});

describe("regionOrderFor", () => {
  it("reads the client's continent row, and has no preference without one", () => {
    const table = RegionOrderTable.parse({ EU: ["eu-west", "us-east"], NA: ["us-east", "eu-west"] });
    expect(regionOrderFor(table, "EU")).toEqual(["eu-west", "us-east"]);
    expect(regionOrderFor(table, "AS")).toEqual([]);
    expect(regionOrderFor(table, undefined)).toEqual([]);
    expect(RegionOrderTable.safeParse({ XX: ["eu-west"] }).success).toBe(false);
  });
});

describe("CircuitBreaker", () => {
  it("opens after three failures in a row, lets one probe through after the open period, and closes on its success", () => {
    const breaker = new CircuitBreaker({ failuresToOpen: 3, openMs: 10_000 });
    breaker.failed(0);
    breaker.failed(1);
    expect(breaker.allow(2)).toBe(true);
    breaker.failed(2);
    expect(breaker.state(3)).toBe("open");
    expect(breaker.allow(9_999)).toBe(false);
    expect(breaker.allow(10_002)).toBe(true); // the probe
    expect(breaker.allow(10_003)).toBe(false); // only one
    breaker.succeeded();
    expect(breaker.state(10_004)).toBe("closed");
    expect(breaker.allow(10_004)).toBe(true);
  });

  it("a failed probe opens it again for another period; a probe that never reports is given up on", () => {
    const breaker = new CircuitBreaker({ failuresToOpen: 1, openMs: 1_000 });
    breaker.failed(0);
    expect(breaker.allow(1_000)).toBe(true);
    breaker.failed(1_001);
    expect(breaker.allow(1_500)).toBe(false);
    expect(breaker.allow(2_001)).toBe(true);
    // This probe never reports: after another open period a new one may go.
    expect(breaker.allow(2_500)).toBe(false);
    expect(breaker.allow(3_001)).toBe(true);
  });

  it("a success between failures resets the count", () => {
    const breaker = new CircuitBreaker({ failuresToOpen: 2, openMs: 1_000 });
    breaker.failed(0);
    breaker.succeeded();
    breaker.failed(1);
    expect(breaker.state(2)).toBe("closed");
  });
});
