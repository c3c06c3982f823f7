import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { levelOf } from "../../src/core/levels.js";
import { ProgramQueue, type QueuedCall, type QueueSettings } from "../../src/core/queue.js";

const settings: QueueSettings = {
  levels: 4,
  firstBoundMs: 1_000,
  growth: 2,
  priorityValue: "atlas",
  starvationRatio: 3,
  starvationMinServiceMs: 500,
  tenantHalfLifeMs: 5_000,
};

// Written out here rather than imported, so the test does not trust the code under test.
const naturalLevel = (call: QueuedCall) => levelOf(call.pathMs, settings);
const starving = (call: QueuedCall, now: number) =>
  (call.waitMs + (now - call.enqueuedAt)) / Math.max(call.pathMs, settings.starvationMinServiceMs) > settings.starvationRatio;
const starveAt = (call: QueuedCall) => call.enqueuedAt - call.waitMs + settings.starvationRatio * Math.max(call.pathMs, settings.starvationMinServiceMs);
/**
 * Level 0 for the one promoted call of a program (its starving call that starved first,
 * then the earliest inserted, `seq` = position in `waiting`); the natural level otherwise.
 */
function effectiveLevels(waiting: QueuedCall[], now: number): Map<string, number> {
  const promoted = new Map<string, { call: QueuedCall; seq: number }>();
  waiting.forEach((call, seq) => {
    if (naturalLevel(call) === 0 || !starving(call, now)) return;
    const key = `${call.tenantId}/${call.programId}`;
    const current = promoted.get(key);
    if (current === undefined || starveAt(call) < starveAt(current.call) || (starveAt(call) === starveAt(current.call) && seq < current.seq)) {
      promoted.set(key, { call, seq });
    }
  });
  const chosen = new Set([...promoted.values()].map((p) => p.call.callId));
  return new Map(waiting.map((call) => [call.callId, chosen.has(call.callId) ? 0 : naturalLevel(call)]));
}

type Op =
  | { kind: "enqueue"; tenant: number; program: number; pathMs: number; waitMs: number; weight: number; dt: number }
  | { kind: "dequeue"; dt: number }
  | { kind: "remove"; pick: number }
  | { kind: "charge"; tenant: number; serviceMs: number; dt: number }
  /** A look at another instant, possibly earlier: must not disturb what comes after. */
  | { kind: "peek"; offset: number };

const valueMs = fc.oneof(fc.constantFrom(0, 999, 1_000, 1_999, 2_000, 4_000), fc.integer({ min: 0, max: 12_000 }));
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant("enqueue" as const), tenant: fc.integer({ min: 0, max: 3 }), program: fc.integer({ min: 0, max: 2 }), pathMs: valueMs, waitMs: fc.integer({ min: 0, max: 20_000 }), weight: fc.constantFrom(1, 2, 3), dt: fc.integer({ min: 0, max: 3_000 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("dequeue" as const), dt: fc.integer({ min: 0, max: 3_000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("charge" as const), tenant: fc.integer({ min: 0, max: 3 }), serviceMs: fc.integer({ min: 0, max: 5_000 }), dt: fc.integer({ min: 0, max: 3_000 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("peek" as const), offset: fc.integer({ min: -20_000, max: 20_000 }) }) },
);

/** Runs the ops, then drains the queue; calls `check` before each dequeue with the waiting set. */
function run(ops: Op[], check: (taken: ReturnType<ProgramQueue["dequeue"]>, waiting: QueuedCall[], now: number, queue: ProgramQueue) => void) {
  const queue = new ProgramQueue(settings);
  const waiting = new Map<string, QueuedCall>();
  const enqueued: string[] = [];
  const removed: string[] = [];
  const dequeued: string[] = [];
  let now = 0;
  let n = 0;
  const takeOne = () => {
    const before = [...waiting.values()];
    const taken = queue.dequeue(now);
    check(taken, before, now, queue);
    if (taken !== undefined) {
      dequeued.push(taken.call.callId);
      waiting.delete(taken.call.callId);
    }
    return taken;
  };
  for (const o of ops) {
    if (o.kind === "enqueue") {
      now += o.dt;
      const call: QueuedCall = {
        callId: `c${n++}`, tenantId: `t${o.tenant}`, programId: `p${o.program}`, threadId: "main",
        serviceMs: o.pathMs, pathMs: o.pathMs, waitMs: o.waitMs, weight: o.weight, promptTokens: 1, enqueuedAt: now,
      };
      queue.enqueue(call);
      waiting.set(call.callId, call);
      enqueued.push(call.callId);
    } else if (o.kind === "dequeue") {
      now += o.dt;
      takeOne();
    } else if (o.kind === "remove") {
      const ids = [...waiting.keys()];
      const id = ids.length === 0 ? "none" : (ids[o.pick % ids.length] as string);
      const out = queue.remove(id);
      expect(out?.callId).toBe(ids.length === 0 ? undefined : id);
      if (out !== undefined) {
        waiting.delete(id);
        removed.push(id);
      }
    } else if (o.kind === "charge") {
      now += o.dt;
      queue.chargeTenant(`t${o.tenant}`, o.serviceMs, now);
    } else {
      const at = now + o.offset;
      const order = queue.peekOrder(at);
      const expected = naiveSuccessive([...waiting.values()], at, (t) => queue.tenantShare(t, at));
      expect(order.map((d) => [d.call.callId, d.level])).toEqual(expected);
    }
    expect(queue.size).toBe(waiting.size);
  }
  while (takeOne() !== undefined);
  return { queue, enqueued, removed, dequeued };
}

describe("ProgramQueue properties", () => {
  it("takes the fairest tenant's call, never ahead of that tenant's own higher-level calls, and every call exactly once", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        const { queue, enqueued, removed, dequeued } = run(ops, (taken, waiting, now, q) => {
          if (taken === undefined) {
            expect(waiting).toEqual([]);
            return;
          }
          expect(waiting.some((c) => c.callId === taken.call.callId)).toBe(true);
          const levels = effectiveLevels(waiting, now);
          expect(taken.level).toBe(levels.get(taken.call.callId));
          expect(taken.naturalLevel).toBe(naturalLevel(taken.call));
          expect(taken.promoted).toBe(taken.level < taken.naturalLevel);
          const share = q.tenantShare(taken.call.tenantId, now);
          for (const other of waiting) {
            // No tenant with a smaller share waits; within the tenant, no call of a higher level.
            expect(q.tenantShare(other.tenantId, now)).toBeGreaterThanOrEqual(share);
            if (other.tenantId === taken.call.tenantId) expect(levels.get(other.callId)).toBeGreaterThanOrEqual(taken.level);
          }
          // At most one promoted call per program at any time.
          const promotedPrograms = waiting.filter((c) => (levels.get(c.callId) ?? 0) < naturalLevel(c)).map((c) => `${c.tenantId}/${c.programId}`);
          expect(new Set(promotedPrograms).size).toBe(promotedPrograms.length);
        });
        expect(queue.size).toBe(0);
        expect(new Set(dequeued).size).toBe(dequeued.length);
        expect([...dequeued, ...removed].sort()).toEqual([...enqueued].sort());
      }),
      { numRuns: 300 },
    );
  });

  it("dequeues in the same order as a naive sort by (tenant share, level, FCFS)", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 120 }), (ops) => {
        run(ops, (taken, waiting, now, queue) => {
          const expected = naiveOrder(waiting, now, (tenantId) => queue.tenantShare(tenantId, now));
          expect(taken?.call.callId).toBe(expected[0]);
        });
      }),
      { numRuns: 300 },
    );
  });

  it("reports through peekOrder and depthByLevel exactly what successive dequeues produce", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.integer({ min: 0, max: 50_000 }), (ops, later) => {
        const queue = new ProgramQueue(settings);
        let now = 0;
        ops.forEach((o, i) => {
          if (o.kind === "charge") queue.chargeTenant(`t${o.tenant}`, o.serviceMs, now);
          if (o.kind !== "enqueue") return;
          now += o.dt;
          queue.enqueue({ callId: `r${i}`, tenantId: `t${o.tenant}`, programId: `p${o.program}`, threadId: "main", serviceMs: o.pathMs, pathMs: o.pathMs, waitMs: o.waitMs, weight: o.weight, promptTokens: 1, enqueuedAt: now });
        });
        const at = now + later;
        const peeked = queue.peekOrder(at);
        const depth = queue.depthByLevel(at);
        expect(depth.reduce((a, b) => a + b, 0)).toBe(peeked.length);
        const taken: string[] = [];
        for (let d = queue.dequeue(at); d !== undefined; d = queue.dequeue(at)) taken.push(d.call.callId);
        expect(taken).toEqual(peeked.map((d) => d.call.callId));
      }),
      { numRuns: 200 },
    );
  });
});

/** Tenant share first, then the effective level, then FCFS: the first is the next dequeue. */
function naiveOrder(waiting: QueuedCall[], now: number, share: (tenantId: string) => number): string[] {
  const levels = effectiveLevels(waiting, now);
  return waiting
    .map((call, seq) => ({ call, seq, level: levels.get(call.callId) ?? 0, share: share(call.tenantId) }))
    .sort((a, b) => a.share - b.share || a.level - b.level || a.call.enqueuedAt - b.call.enqueuedAt || a.seq - b.seq)
    .map((item) => item.call.callId);
}

/** Successive naive picks at one instant, each with the level the call had when picked. */
function naiveSuccessive(waiting: QueuedCall[], now: number, share: (tenantId: string) => number): [string, number][] {
  const left = [...waiting];
  const out: [string, number][] = [];
  while (left.length > 0) {
    const first = naiveOrder(left, now, share)[0] as string;
    out.push([first, effectiveLevels(left, now).get(first) ?? -1]);
    left.splice(left.findIndex((c) => c.callId === first), 1);
  }
  return out;
}
