import { describe, expect, it } from "vitest";
import { DuplicateCallError, isStarving, ProgramQueue, type QueueSettings } from "../../src/core/queue.js";
import { makeCall, TEST_QUEUE_SETTINGS } from "./calls.js";

const ids = (queue: ProgramQueue, now: number) => queue.peekOrder(now).map((d) => d.call.callId);

function drain(queue: ProgramQueue, now: number): string[] {
  const order: string[] = [];
  for (let d = queue.dequeue(now); d !== undefined; d = queue.dequeue(now)) order.push(d.call.callId);
  return order;
}

describe("ProgramQueue ordering", () => {
  it("serves one level FCFS by enqueue time, then by insertion order", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "c", enqueuedAt: 30 }));
    queue.enqueue(makeCall({ callId: "a", enqueuedAt: 10 }));
    queue.enqueue(makeCall({ callId: "b1", enqueuedAt: 20 }));
    queue.enqueue(makeCall({ callId: "b2", enqueuedAt: 20 }));
    expect(ids(queue, 100)).toEqual(["a", "b1", "b2", "c"]);
    expect(drain(queue, 100)).toEqual(["a", "b1", "b2", "c"]);
    expect(queue.size).toBe(0);
    expect(queue.dequeue(100)).toBeUndefined();
  });

  it("serves a lower-service program's later call before an earlier high-service one", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "long", pathMs: 5_000, serviceMs: 5_000, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "short", pathMs: 100, serviceMs: 100, enqueuedAt: 50 }));
    const first = queue.dequeue(60);
    expect(first).toMatchObject({ call: { callId: "short" }, level: 0, promoted: false });
    expect(queue.dequeue(60)).toMatchObject({ call: { callId: "long" }, level: 3, promoted: false });
  });

  it("orders by the attained service under PLAS and by the critical path under ATLAS", () => {
    // A parallel program: much total service, short critical path.
    const parallel = makeCall({ callId: "parallel", serviceMs: 6_000, pathMs: 500, enqueuedAt: 0 });
    const sequential = makeCall({ callId: "sequential", serviceMs: 1_500, pathMs: 1_500, enqueuedAt: 1 });
    const atlas = new ProgramQueue({ ...TEST_QUEUE_SETTINGS, priorityValue: "atlas" });
    const plas = new ProgramQueue({ ...TEST_QUEUE_SETTINGS, priorityValue: "plas" });
    for (const queue of [atlas, plas]) {
      queue.enqueue(parallel);
      queue.enqueue(sequential);
    }
    expect(atlas.peekOrder(2).map((d) => [d.call.callId, d.level])).toEqual([
      ["parallel", 0],
      ["sequential", 1],
    ]);
    expect(plas.peekOrder(2).map((d) => [d.call.callId, d.level])).toEqual([
      ["sequential", 1],
      ["parallel", 3],
    ]);
  });

  it("keeps its own copy of a call, so later mutation by the caller changes nothing", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    const call = makeCall({ callId: "x", pathMs: 0 });
    queue.enqueue(call);
    call.pathMs = 10_000;
    expect(queue.dequeue(0)).toMatchObject({ level: 0, call: { pathMs: 0 } });
  });
});

describe("ProgramQueue tenant fairness", () => {
  it("serves a tenant with less decayed service first, however many new programs the other opened", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.chargeTenant("ten_a", 5_000, 0);
    queue.chargeTenant("ten_b", 1_000, 0);
    for (let i = 0; i < 10; i++) queue.enqueue(makeCall({ callId: `a${i}`, tenantId: "ten_a", enqueuedAt: i }));
    queue.enqueue(makeCall({ callId: "b0", tenantId: "ten_b", enqueuedAt: 100 }));
    const order = drain(queue, 200);
    expect(order[0]).toBe("b0");
    expect(order.slice(1)).toEqual(Array.from({ length: 10 }, (_, i) => `a${i}`));
  });

  it("breaks equal shares by the earliest head call", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "b0", tenantId: "ten_b", enqueuedAt: 5 }));
    queue.enqueue(makeCall({ callId: "a0", tenantId: "ten_a", enqueuedAt: 7 }));
    queue.enqueue(makeCall({ callId: "c0", tenantId: "ten_c", enqueuedAt: 3 }));
    expect(drain(queue, 10)).toEqual(["c0", "b0", "a0"]);
  });

  it("serves the fairer tenant first across levels, and each tenant's own calls by level", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.chargeTenant("ten_a", 50_000, 0);
    queue.enqueue(makeCall({ callId: "b-high-level", tenantId: "ten_b", pathMs: 3_000, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "b-level-0", tenantId: "ten_b", pathMs: 0, enqueuedAt: 5 }));
    queue.enqueue(makeCall({ callId: "a-level-0", tenantId: "ten_a", pathMs: 0, enqueuedAt: 1 }));
    // A new program of the heavier tenant does not jump ahead of the lighter tenant's deep call.
    expect(ids(queue, 0)).toEqual(["b-level-0", "b-high-level", "a-level-0"]);
  });

  it("breaks a tie of shares by the lower level before the earlier call", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "a-deep-early", tenantId: "ten_a", pathMs: 3_000, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "b-top-late", tenantId: "ten_b", pathMs: 0, enqueuedAt: 9 }));
    expect(queue.dequeue(10)?.call.callId).toBe("b-top-late");
  });

  it("gives a tenant that opens a program per call no more turns than under one program", () => {
    // The same calls and the same completions, once under honest program IDs (deep
    // levels) and once one program per call (all level 0): tenant A's turns against
    // tenant B do not move.
    const turns = (churn: boolean) => {
      const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
      queue.chargeTenant("ten_b", 1, 0);
      for (let i = 0; i < 20; i++) {
        queue.enqueue(makeCall({ callId: `a${i}`, tenantId: "ten_a", programId: churn ? `a-prog-${i}` : "a-prog", pathMs: churn ? 0 : 1_000 * i, enqueuedAt: i }));
        queue.enqueue(makeCall({ callId: `b${i}`, tenantId: "ten_b", programId: "b-prog", pathMs: 400 * i, enqueuedAt: i + 0.5 }));
      }
      const tenants: string[] = [];
      let now = 100;
      for (let d = queue.dequeue(now); d !== undefined; d = queue.dequeue(now)) {
        tenants.push(d.call.tenantId);
        now += 100;
        queue.chargeTenant(d.call.tenantId, 250, now);
      }
      return tenants;
    };
    expect(turns(true)).toEqual(turns(false));
    expect(turns(false).slice(0, 10).filter((t) => t === "ten_a")).toHaveLength(5);
  });

  it("divides the share by the tenant's plan weight", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "a0", tenantId: "ten_a", weight: 2, enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "b0", tenantId: "ten_b", weight: 1, enqueuedAt: 1 }));
    queue.chargeTenant("ten_a", 3_000, 0);
    queue.chargeTenant("ten_b", 2_000, 0);
    expect(queue.tenantShare("ten_a", 0)).toBe(1_500);
    expect(queue.tenantShare("ten_b", 0)).toBe(2_000);
    // More raw service than B, but half of it per unit of weight: A goes first.
    expect(ids(queue, 0)).toEqual(["a0", "b0"]);
  });

  it("uses the weight last seen on the tenant's calls", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.chargeTenant("ten_a", 1_000, 0);
    queue.enqueue(makeCall({ tenantId: "ten_a", weight: 1 }));
    expect(queue.tenantShare("ten_a", 0)).toBe(1_000);
    queue.enqueue(makeCall({ tenantId: "ten_a", weight: 4 }));
    expect(queue.tenantShare("ten_a", 0)).toBe(250);
  });

  it("halves a tenant's share after one half-life", () => {
    const settings: QueueSettings = { ...TEST_QUEUE_SETTINGS, tenantHalfLifeMs: 10_000 };
    const queue = new ProgramQueue(settings);
    queue.chargeTenant("ten_a", 800, 1_000);
    expect(queue.tenantShare("ten_a", 1_000)).toBe(800);
    expect(queue.tenantShare("ten_a", 11_000)).toBe(400);
    expect(queue.tenantShare("ten_a", 31_000)).toBe(100);
    // A later charge adds to the decayed figure.
    queue.chargeTenant("ten_a", 100, 11_000);
    expect(queue.tenantShare("ten_a", 11_000)).toBe(500);
    expect(queue.tenantShare("ten_a", 21_000)).toBe(250);
    expect(queue.tenantShare("unknown", 0)).toBe(0);
  });

  it("lets decay change which tenant goes first", () => {
    const queue = new ProgramQueue({ ...TEST_QUEUE_SETTINGS, tenantHalfLifeMs: 1_000 });
    queue.chargeTenant("ten_a", 1_000, 0); // a burst: 1000 -> 125 after 3 half-lives
    queue.enqueue(makeCall({ callId: "b0", tenantId: "ten_b", enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "a0", tenantId: "ten_a", enqueuedAt: 1 }));
    expect(ids(queue, 0)).toEqual(["b0", "a0"]); // A 1000 > B 0
    queue.chargeTenant("ten_b", 200, 3_000); // B's recent use
    expect(ids(queue, 3_000)).toEqual(["a0", "b0"]); // A 125 < B 200
  });
});

describe("ProgramQueue starvation", () => {
  // pathMs 2000 -> level 2; β = 4: starving once total wait / 2000 > 4, i.e. wait > 8000.
  const settings: QueueSettings = { ...TEST_QUEUE_SETTINGS, starvationRatio: 4, starvationMinServiceMs: 1 };

  it("promotes a call to level 0 exactly when its ratio passes β", () => {
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ callId: "old", pathMs: 2_000, waitMs: 3_000, enqueuedAt: 1_000 }));
    // wait = 3000 + (now - 1000): 8000 at now = 6000.
    expect(queue.peekOrder(5_999)[0]).toMatchObject({ level: 2, naturalLevel: 2, promoted: false });
    expect(queue.peekOrder(6_000)[0]).toMatchObject({ level: 2, promoted: false }); // ratio exactly β: not above
    expect(queue.depthByLevel(6_000)).toEqual([0, 0, 1, 0]);
    expect(queue.peekOrder(6_001)[0]).toMatchObject({ level: 0, naturalLevel: 2, promoted: true });
    expect(queue.depthByLevel(6_001)).toEqual([1, 0, 0, 0]);
    expect(queue.dequeue(6_001)).toMatchObject({ call: { callId: "old" }, level: 0, promoted: true });
  });

  it("agrees with isStarving just below and just above β", () => {
    const call = makeCall({ pathMs: 2_000, waitMs: 0, enqueuedAt: 0 });
    expect(isStarving(call, 7_999.999, settings)).toBe(false);
    expect(isStarving(call, 8_000, settings)).toBe(false);
    expect(isStarving(call, 8_000.001, settings)).toBe(true);
    const queue = new ProgramQueue(settings);
    queue.enqueue(call);
    expect(queue.dequeue(8_000)).toMatchObject({ level: 2, promoted: false });
    queue.enqueue({ ...call, callId: "again" });
    expect(queue.dequeue(8_000.001)).toMatchObject({ level: 0, promoted: true });
  });

  it("puts a starving call ahead of a newer level-1 call and FCFS among level-0 calls", () => {
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ callId: "starving", pathMs: 2_000, waitMs: 9_000, enqueuedAt: 100 }));
    queue.enqueue(makeCall({ callId: "level1", pathMs: 1_000, enqueuedAt: 50 }));
    queue.enqueue(makeCall({ callId: "new", pathMs: 0, enqueuedAt: 200 }));
    expect(ids(queue, 300)).toEqual(["starving", "new", "level1"]);
  });

  it("floors the denominator so little service does not starve at once", () => {
    const floored = new ProgramQueue({ ...settings, starvationMinServiceMs: 5_000 });
    floored.enqueue(makeCall({ pathMs: 1_000, waitMs: 10_000, enqueuedAt: 0 }));
    // 10000 / max(1000, 5000) = 2 < 4: not starving, though 10000 / 1000 = 10 would be.
    expect(floored.peekOrder(0)[0]).toMatchObject({ level: 1, promoted: false });
    expect(floored.peekOrder(10_001)[0]).toMatchObject({ level: 0, promoted: true });
  });

  it("never promotes when β is Infinity", () => {
    const queue = new ProgramQueue({ ...settings, starvationRatio: Number.POSITIVE_INFINITY });
    queue.enqueue(makeCall({ pathMs: 5_000, waitMs: 1e9 }));
    expect(queue.dequeue(1e12)).toMatchObject({ level: 3, promoted: false });
  });

  it("promotes one call per program at a time: the rest move up as it is taken", () => {
    const queue = new ProgramQueue(settings);
    for (let i = 0; i < 5; i++) queue.enqueue(makeCall({ callId: `wide${i}`, programId: "wide", pathMs: 2_000, enqueuedAt: i }));
    queue.enqueue(makeCall({ callId: "fresh", programId: "other", pathMs: 0, enqueuedAt: 50 }));
    queue.enqueue(makeCall({ callId: "level1", programId: "mid", pathMs: 1_000, enqueuedAt: 19_000 }));
    // All five of "wide" starve by 20 000, but only its first-starving call is at level 0.
    expect(queue.depthByLevel(20_000)).toEqual([2, 1, 4, 0]);
    const order = queue.peekOrder(20_000);
    expect(order.map((d) => [d.call.callId, d.level])).toEqual([
      ["wide0", 0],
      ["wide1", 0],
      ["wide2", 0],
      ["wide3", 0],
      ["wide4", 0],
      ["fresh", 0],
      ["level1", 1],
    ]);
    // Taken one by one, each next call of the program is promoted in turn.
    expect(queue.dequeue(20_000)).toMatchObject({ call: { callId: "wide0" }, promoted: true });
    expect(queue.depthByLevel(20_000)).toEqual([2, 1, 3, 0]);
    expect(queue.remove("wide1")?.callId).toBe("wide1");
    expect(queue.dequeue(20_000)).toMatchObject({ call: { callId: "wide2" }, promoted: true });
  });

  it("promotes a program's call that starved first, whatever order the questions came in", () => {
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ callId: "late-starver", programId: "p", pathMs: 2_000, enqueuedAt: 0 }));
    expect(queue.depthByLevel(8_001)).toEqual([1, 0, 0, 0]);
    // Enqueued later, but with a long wait behind it: it starved earlier than the promoted one.
    queue.enqueue(makeCall({ callId: "early-starver", programId: "p", pathMs: 2_000, waitMs: 9_000, enqueuedAt: 8_001 }));
    expect(queue.dequeue(8_002)).toMatchObject({ call: { callId: "early-starver" }, promoted: true });
    expect(queue.dequeue(8_002)).toMatchObject({ call: { callId: "late-starver" }, promoted: true });
  });

  it("undoes a promotion if asked about an earlier time", () => {
    const queue = new ProgramQueue(settings);
    queue.enqueue(makeCall({ pathMs: 2_000, enqueuedAt: 0 }));
    expect(queue.depthByLevel(9_000)).toEqual([1, 0, 0, 0]);
    expect(queue.depthByLevel(1_000)).toEqual([0, 0, 1, 0]);
    expect(queue.dequeue(1_000)).toMatchObject({ level: 2, promoted: false });
  });
});

describe("ProgramQueue bookkeeping", () => {
  it("removes a waiting call by id and forgets it everywhere", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "keep", enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "gone", enqueuedAt: 1, pathMs: 2_000 }));
    expect(queue.has("gone")).toBe(true);
    expect(queue.remove("gone")).toMatchObject({ callId: "gone" });
    expect(queue.has("gone")).toBe(false);
    expect(queue.size).toBe(1);
    expect(queue.remove("gone")).toBeUndefined();
    expect(queue.depthByLevel(1e9)).toEqual([1, 0, 0, 0]); // a removed call cannot starve later
    expect(drain(queue, 1e9)).toEqual(["keep"]);
    // The id can be used again once it has left.
    queue.enqueue(makeCall({ callId: "gone" }));
    expect(queue.has("gone")).toBe(true);
  });

  it("rejects a duplicate call id without changing anything", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "dup", pathMs: 0 }));
    expect(() => queue.enqueue(makeCall({ callId: "dup", pathMs: 3_000 }))).toThrow(DuplicateCallError);
    expect(queue.size).toBe(1);
    expect(queue.depthByLevel(0)).toEqual([1, 0, 0, 0]);
  });

  it.each([
    ["callId", { callId: "" }],
    ["tenantId", { tenantId: "" }],
    ["serviceMs", { serviceMs: -1 }],
    ["pathMs", { pathMs: Number.NaN }],
    ["waitMs", { waitMs: Number.POSITIVE_INFINITY }],
    ["weight", { weight: 0 }],
    ["promptTokens", { promptTokens: -5 }],
    ["enqueuedAt", { enqueuedAt: Number.NaN }],
  ])("rejects an invalid %s without changing anything", (field, override) => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    expect(() => queue.enqueue(makeCall(override))).toThrow(new RegExp(field));
    expect(queue.size).toBe(0);
    expect(queue.depthByLevel(0)).toEqual([0, 0, 0, 0]);
  });

  it("rejects invalid settings", () => {
    expect(() => new ProgramQueue({ ...TEST_QUEUE_SETTINGS, levels: 0 })).toThrow(/levels/);
    expect(() => new ProgramQueue({ ...TEST_QUEUE_SETTINGS, starvationRatio: 0 })).toThrow(/starvationRatio/);
    expect(() => new ProgramQueue({ ...TEST_QUEUE_SETTINGS, starvationMinServiceMs: 0 })).toThrow(/starvationMinServiceMs/);
    expect(() => new ProgramQueue({ ...TEST_QUEUE_SETTINGS, tenantHalfLifeMs: -1 })).toThrow(/tenantHalfLifeMs/);
    expect(() => new ProgramQueue({ ...TEST_QUEUE_SETTINGS, priorityValue: "fifo" as "plas" })).toThrow(/priorityValue/);
  });

  it("rejects an invalid charge", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    expect(() => queue.chargeTenant("ten_a", -1, 0)).toThrow(RangeError);
    expect(() => queue.chargeTenant("ten_a", Number.NaN, 0)).toThrow(RangeError);
    expect(queue.tenantShare("ten_a", 0)).toBe(0);
  });

  it("hands out the best call that accept takes, leaving the others", () => {
    const queue = new ProgramQueue(TEST_QUEUE_SETTINGS);
    queue.enqueue(makeCall({ callId: "first", enqueuedAt: 0 }));
    queue.enqueue(makeCall({ callId: "second", enqueuedAt: 1, tenantId: "ten_b" }));
    queue.enqueue(makeCall({ callId: "third", enqueuedAt: 2, pathMs: 2_000 }));
    expect(queue.dequeue(3, (call) => call.callId !== "first")?.call.callId).toBe("second");
    expect(queue.dequeue(3, () => false)).toBeUndefined();
    expect(queue.size).toBe(2);
    expect(drain(queue, 3)).toEqual(["first", "third"]);
  });

  it("forgets idle tenants whose service has decayed away", () => {
    const queue = new ProgramQueue({ ...TEST_QUEUE_SETTINGS, tenantHalfLifeMs: 1_000 });
    queue.chargeTenant("ten_a", 100, 0);
    queue.enqueue(makeCall({ tenantId: "ten_b" }));
    queue.chargeTenant("ten_b", 0, 0);
    expect(queue.forgetIdleTenants(0)).toBe(0);
    expect(queue.forgetIdleTenants(100_000)).toBe(1); // ten_a; ten_b still has a call waiting
    expect(queue.tenantShare("ten_a", 100_000)).toBe(0);
  });
});
