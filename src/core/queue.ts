/*
 * The pool's program-level queue (Autellix PLAS/ATLAS multi-level queue), fair
 * across tenants.
 *
 * Order. Tenants first: the tenant with the smallest decayed service / weight goes
 * next (ties: the tenant whose next call has the lower level, then the earlier
 * one). Within the tenant, its calls by level, then FCFS (enqueuedAt, then
 * insertion order). A call's level is levelOf(program value) (PLAS: attained
 * service; ATLAS: critical path), so program priority decides among a tenant's own
 * calls and tenant fair share decides between tenants. Why tenants first, across
 * levels: with fairness only inside a level, a tenant that opens a new program for
 * every call keeps all its calls at level 0 and jumps ahead of other tenants' deeper
 * calls; here its calls draw on its one tenant share whatever their program IDs
 * (the order between tenants does not depend on them at all).
 *
 * Anti-starvation, by program: a call whose program is starving, i.e.
 *   (waitMs + (now - enqueuedAt)) / max(value, starvationMinServiceMs) > β,
 * is promoted to level 0 of its tenant, but only one call per program at a time:
 * the program's starving call that starved first. Its other starving calls wait
 * behind it and move up one by one as it is taken, so a program with many parallel
 * calls cannot flood the top level, and promotion never reaches past the tenant's
 * own share.
 *
 * Structure, and why it is cheap. Levels change with time only through starvation,
 * and "starving" is monotone in time: a call starves from a fixed instant
 *   starveAt = enqueuedAt - waitMs + β · max(value, floor)
 * on. So each call sits in a FCFS heap per (tenant, level), and calls that may still
 * be promoted also sit in one global heap keyed by starveAt (or, once starving
 * behind their program's promoted call, in that program's heap by starveAt).
 * Before answering at `now`, the queue pops the global heap up to `now`.
 * Tenant shares all decay by the same factor, but are compared at `now` anyway (one
 * Math.pow per tenant), which keeps ties exact.
 *
 * Complexity (n waiting calls, K levels, T tenants with waiting calls, p calls whose
 * starvation instant passed since the previous question):
 *   enqueue O(log n), remove O(log n), has O(1),
 *   dequeue O(p log n + T · K + log n) when `accept` takes the best call (an
 *     `accept` that refuses it falls back to peekOrder's O(n log n)),
 *   depthByLevel O(K + p log n), peekOrder O(n log n) (inspection only; it runs the
 *     real dequeue on a copy, so it is exactly what successive dequeues produce).
 * Promotions are a function of the waiting calls and `now`: a `now` earlier than a
 * previous one (not expected from a monotone clock) re-derives them.
 */

import { type HeapSlot, IndexedHeap } from "./indexed-heap.js";
import { levelOf, type LevelSettings, validateLevelSettings } from "./levels.js";
import { TenantShares } from "./tenant-shares.js";
import { ReleasingMap } from "./releasing-map.js";

export interface QueuedCall {
  callId: string;
  tenantId: string;
  programId: string;
  threadId: string;
  /** PLAS value of the program (attained service, ms), from the edge. */
  serviceMs: number;
  /** ATLAS value (critical path, ms), from the edge. */
  pathMs: number;
  /** Program's accumulated queueing time before this call, from the edge. */
  waitMs: number;
  /** Tenant plan weight (> 0). */
  weight: number;
  promptTokens: number;
  /** The call's max_tokens, when known (admission's expected output never exceeds it). */
  maxTokens?: number;
  /** Engine that served the program last. */
  affinityEngine?: string;
  /** The hint the core dropped at enqueue: that engine turned over its KV since (kv/affinity-turnover.ts). */
  affinityTurnedOver?: string;
  /** ms, injected clock. */
  enqueuedAt: number;
  /**
   * The program's true remaining work (ms), for the "oracle" value only: known to a
   * simulator that has the whole program in advance, never to the real pool.
   */
  remainingMs?: number;
}

/**
 * What a call is ordered by:
 * - "plas": the program's attained service; "atlas": its critical path (the pool's);
 * - "none": 0 for every call, so every call starts at the top level whatever its
 *   program did before (a request-level queue: FCFS within tenant fair share);
 * - "oracle": the program's true remaining work (`remainingMs`), i.e. shortest
 *   remaining program first, a simulator's yardstick that no real pool can know.
 */
export type PriorityValue = "plas" | "atlas" | "none" | "oracle";

export const PRIORITY_VALUES: readonly PriorityValue[] = Object.freeze(["plas", "atlas", "none", "oracle"]);

export interface QueueSettings extends LevelSettings {
  /**
   * "atlas" equals "plas" for sequential programs and keeps parallel siblings together;
   * "none" and "oracle" are baselines for the simulator (see PriorityValue).
   */
  priorityValue: PriorityValue;
  /** β: promote to level 0 when wait / service > β. Infinity disables promotion. */
  starvationRatio: number;
  /** Floor of the ratio's denominator, so programs with little service are not "starving" at once. */
  starvationMinServiceMs: number;
  /** Half-life of the tenant service used for fairness. */
  tenantHalfLifeMs: number;
}

export interface Dequeued {
  call: QueuedCall;
  /** Effective level (0 when promoted). */
  level: number;
  /** Moved up to level 0 by starvation (only a call whose own level is below 0 can be). */
  promoted: boolean;
  /** The level of the program's value, before any promotion. */
  naturalLevel: number;
}

export class DuplicateCallError extends Error {
  constructor(readonly callId: string) {
    super(`call ${callId} is already queued`);
    this.name = "DuplicateCallError";
  }
}

export function validateQueueSettings(settings: QueueSettings): void {
  validateLevelSettings(settings);
  if (!PRIORITY_VALUES.includes(settings.priorityValue)) {
    throw new RangeError(`priorityValue must be one of ${PRIORITY_VALUES.join(", ")}, got ${String(settings.priorityValue)}`);
  }
  if (Number.isNaN(settings.starvationRatio) || settings.starvationRatio <= 0) {
    throw new RangeError(`starvationRatio must be > 0 (Infinity disables), got ${settings.starvationRatio}`);
  }
  if (!Number.isFinite(settings.starvationMinServiceMs) || settings.starvationMinServiceMs <= 0) {
    throw new RangeError(`starvationMinServiceMs must be a finite number > 0, got ${settings.starvationMinServiceMs}`);
  }
  if (!Number.isFinite(settings.tenantHalfLifeMs) || settings.tenantHalfLifeMs <= 0) {
    throw new RangeError(`tenantHalfLifeMs must be a finite number > 0, got ${settings.tenantHalfLifeMs}`);
  }
}

/** The value the queue orders a call by. */
export function priorityValueOf(
  call: Pick<QueuedCall, "serviceMs" | "pathMs" | "remainingMs">,
  settings: Pick<QueueSettings, "priorityValue">,
): number {
  switch (settings.priorityValue) {
    case "plas":
      return call.serviceMs;
    case "atlas":
      return call.pathMs;
    case "none":
      return 0;
    case "oracle":
      if (call.remainingMs === undefined) throw new RangeError('the "oracle" value needs the call\'s remainingMs');
      return call.remainingMs;
  }
}

/** The starvation rule: (waitMs + time queued now) / max(value, floor) > β. */
export function isStarving(call: QueuedCall, now: number, settings: QueueSettings): boolean {
  const waited = call.waitMs + (now - call.enqueuedAt);
  const service = Math.max(priorityValueOf(call, settings), settings.starvationMinServiceMs);
  return waited / service > settings.starvationRatio;
}

function invalidCall(call: QueuedCall, what: string): never {
  throw new RangeError(`invalid queued call ${typeof call.callId === "string" ? call.callId : "?"}: ${what}`);
}

function validateCall(call: QueuedCall): void {
  if (typeof call !== "object" || call === null) throw new TypeError("a queued call must be an object");
  for (const key of ["callId", "tenantId", "programId", "threadId"] as const) {
    if (typeof call[key] !== "string" || call[key] === "") invalidCall(call, `${key} must be a non-empty string`);
  }
  for (const key of ["serviceMs", "pathMs", "waitMs", "promptTokens"] as const) {
    if (!Number.isFinite(call[key]) || call[key] < 0) invalidCall(call, `${key} must be a finite number >= 0, got ${call[key]}`);
  }
  if (!Number.isFinite(call.weight) || call.weight <= 0) invalidCall(call, `weight must be a finite number > 0, got ${call.weight}`);
  if (!Number.isFinite(call.enqueuedAt)) invalidCall(call, `enqueuedAt must be finite, got ${call.enqueuedAt}`);
  if (call.affinityEngine !== undefined && typeof call.affinityEngine !== "string") {
    invalidCall(call, "affinityEngine must be a string when present");
  }
  if (call.remainingMs !== undefined && !(Number.isFinite(call.remainingMs) && call.remainingMs >= 0)) {
    invalidCall(call, `remainingMs must be a finite number >= 0 when present, got ${call.remainingMs}`);
  }
  if (call.maxTokens !== undefined && !(Number.isInteger(call.maxTokens) && call.maxTokens >= 1)) {
    invalidCall(call, `maxTokens must be an integer >= 1 when present, got ${call.maxTokens}`);
  }
}

interface Entry {
  readonly call: QueuedCall;
  /** Insertion order, the last FCFS tie-break. */
  readonly seq: number;
  readonly naturalLevel: number;
  /** First instant at which the call may be starving; Infinity when it cannot be promoted. */
  readonly starveAt: number;
  /** tenantId + program: promotion is per program. */
  readonly programKey: string;
  level: number;
  bucketIndex: number;
  /** Position in the starvation heap, or in its program's deferred heap (never both). */
  starveIndex: number;
}

const fcfsBefore = (a: Entry, b: Entry): boolean =>
  a.call.enqueuedAt < b.call.enqueuedAt || (a.call.enqueuedAt === b.call.enqueuedAt && a.seq < b.seq);

const starvesBefore = (a: Entry, b: Entry): boolean => a.starveAt < b.starveAt || (a.starveAt === b.starveAt && a.seq < b.seq);

const bucketSlot: HeapSlot<Entry> = { get: (e) => e.bucketIndex, set: (e, i) => (e.bucketIndex = i) };
const starveSlot: HeapSlot<Entry> = { get: (e) => e.starveIndex, set: (e, i) => (e.starveIndex = i) };

/** One tenant's waiting calls: a FCFS heap per level. */
class TenantCalls {
  readonly levels: (IndexedHeap<Entry> | undefined)[];
  size = 0;

  constructor(levels: number) {
    this.levels = new Array<IndexedHeap<Entry> | undefined>(levels).fill(undefined);
  }

  add(entry: Entry, level: number): void {
    let heap = this.levels[level];
    if (heap === undefined) {
      heap = new IndexedHeap<Entry>(fcfsBefore, bucketSlot);
      this.levels[level] = heap;
    }
    heap.push(entry);
    this.size += 1;
  }

  delete(entry: Entry): boolean {
    const heap = this.levels[entry.level];
    if (heap === undefined || !heap.remove(entry)) return false;
    this.size -= 1;
    return true;
  }

  /** The tenant's next call: the head of its lowest non-empty level. O(K). */
  head(): Entry | undefined {
    for (const heap of this.levels) {
      const head = heap?.peek();
      if (head !== undefined) return head;
    }
    return undefined;
  }

  *entries(): Generator<Entry> {
    for (const heap of this.levels) if (heap !== undefined) yield* heap.items();
  }
}

/** Whether `a` (a tenant's head at `shareA`) goes before `b` (another tenant's head at `shareB`). */
function tenantBefore(a: Entry, shareA: number, b: Entry, shareB: number): boolean {
  if (shareA !== shareB) return shareA < shareB;
  if (a.level !== b.level) return a.level < b.level;
  return fcfsBefore(a, b);
}

export class ProgramQueue {
  readonly settings: Readonly<QueueSettings>;
  readonly #byId = new ReleasingMap<string, Entry>();
  /** Tenant -> its waiting calls by level. */
  readonly #tenantCalls = new Map<string, TenantCalls>();
  readonly #levelSizes: number[];
  /** Calls not yet promoted that can be, by starveAt. */
  readonly #starvation = new IndexedHeap<Entry>(starvesBefore, starveSlot);
  /** The one promoted call of each program that has one. */
  readonly #promoted = new ReleasingMap<string, Entry>();
  /** Starving calls of programs that already have a promoted call, by starveAt. */
  readonly #deferred = new Map<string, IndexedHeap<Entry>>();
  readonly #tenants: TenantShares;
  #promotedThrough = Number.NEGATIVE_INFINITY;
  #nextSeq = 0;

  constructor(settings: QueueSettings, tenants?: TenantShares) {
    validateQueueSettings(settings);
    this.settings = Object.freeze({ ...settings });
    this.#levelSizes = new Array<number>(settings.levels).fill(0);
    this.#tenants = tenants ?? new TenantShares(settings.tenantHalfLifeMs);
  }

  get size(): number {
    return this.#byId.size;
  }

  has(callId: string): boolean {
    return this.#byId.has(callId);
  }

  /** Throws (and changes nothing) on a duplicate callId or an invalid call. */
  enqueue(call: QueuedCall): void {
    validateCall(call);
    if (this.settings.priorityValue === "oracle" && call.remainingMs === undefined) {
      throw new RangeError(`invalid queued call ${call.callId}: the "oracle" value needs remainingMs`);
    }
    if (this.#byId.has(call.callId)) throw new DuplicateCallError(call.callId);
    // A private copy: a caller mutating its object later cannot corrupt the order.
    // (Not frozen: Object.freeze doubled the cost of enqueue+dequeue.) Only peekOrder
    // hands out calls still queued, and it hands out copies.
    const stored: QueuedCall = { ...call };
    const value = priorityValueOf(stored, this.settings);
    const naturalLevel = levelOf(value, this.settings);
    const floored = Math.max(value, this.settings.starvationMinServiceMs);
    const starveAt = naturalLevel === 0 ? Number.POSITIVE_INFINITY : stored.enqueuedAt - stored.waitMs + this.settings.starvationRatio * floored;
    this.#insert(stored, this.#nextSeq++, naturalLevel, starveAt);
  }

  remove(callId: string): QueuedCall | undefined {
    const entry = this.#byId.get(callId);
    if (entry === undefined) return undefined;
    this.#take(entry);
    return entry.call;
  }

  /**
   * Takes the next call in order that `accept` takes. With `backfill` false, only the
   * next call itself: when `accept` refuses it, nothing is taken (strict priority, so a
   * call that needs more room than is free now is not overtaken by smaller ones forever).
   */
  dequeue(now: number, accept?: (call: QueuedCall) => boolean, backfill = true): Dequeued | undefined {
    this.#applyStarvation(now);
    const best = this.#best(now);
    if (best === undefined) return undefined;
    if (accept === undefined || accept(best.call)) return this.#take(best);
    if (!backfill) return undefined;
    // Refused: the next call in the order successive dequeues would take, that accept takes.
    for (const candidate of this.#successiveOrder(now)) {
      if (candidate.call.callId === best.call.callId) continue;
      if (!accept(candidate.call)) continue;
      const entry = this.#byId.get(candidate.call.callId);
      if (entry !== undefined) return this.#take(entry);
    }
    return undefined;
  }

  /** Every waiting call in the order successive dequeues at `now` would take them. */
  peekOrder(now: number): Dequeued[] {
    this.#applyStarvation(now);
    return this.#successiveOrder(now).map((d) => ({ ...d, call: { ...d.call } }));
  }

  chargeTenant(tenantId: string, serviceMs: number, now: number): void {
    this.#tenants.charge(tenantId, serviceMs, now);
  }

  tenantShare(tenantId: string, now: number): number {
    return this.#tenants.share(tenantId, now);
  }

  depthByLevel(now: number): number[] {
    this.#applyStarvation(now);
    return [...this.#levelSizes];
  }

  /**
   * Forgets tenants with nothing queued whose decayed service is below `belowMs`, so
   * a long-running pool does not keep every tenant it ever saw. Call it now and then.
   */
  forgetIdleTenants(now: number, belowMs = 1e-3): number {
    return this.#tenants.forgetIdle(now, belowMs);
  }

  /** The next call: the fairest tenant's head. O(T · K). */
  #best(now: number): Entry | undefined {
    let best: Entry | undefined;
    let bestShare = Number.POSITIVE_INFINITY;
    for (const [tenantId, calls] of this.#tenantCalls) {
      const head = calls.head();
      if (head === undefined) continue;
      const share = this.#tenants.share(tenantId, now);
      if (best === undefined || tenantBefore(head, share, best, bestShare)) {
        best = head;
        bestShare = share;
      }
    }
    return best;
  }

  /**
   * The order successive dequeues at `now` would produce: shares do not move between
   * dequeues, but taking a program's promoted call promotes its next starving one, so
   * this runs the real dequeue on a copy (sharing the read-only tenant shares). O(n log n).
   */
  #successiveOrder(now: number): Dequeued[] {
    const copy = new ProgramQueue(this.settings, this.#tenants);
    copy.#promotedThrough = this.#promotedThrough;
    const entries = [...this.#byId.values()].sort((a, b) => a.seq - b.seq);
    for (const entry of entries) copy.#insert(entry.call, entry.seq, entry.naturalLevel, entry.starveAt);
    copy.#nextSeq = this.#nextSeq;
    copy.#applyStarvation(now);
    const order: Dequeued[] = [];
    for (let next = copy.#best(now); next !== undefined; next = copy.#best(now)) order.push(copy.#take(next));
    return order;
  }

  #insert(call: QueuedCall, seq: number, naturalLevel: number, starveAt: number): void {
    const entry: Entry = {
      call,
      seq,
      naturalLevel,
      starveAt,
      programKey: `${call.tenantId}\u0000${call.programId}`,
      level: naturalLevel,
      bucketIndex: -1,
      starveIndex: -1,
    };
    this.#byId.set(call.callId, entry);
    this.#tenants.callQueued(call.tenantId, call.weight);
    this.#addToLevel(entry, naturalLevel);
    if (Number.isFinite(starveAt)) this.#starvation.push(entry);
  }

  #tenantOf(entry: Entry): TenantCalls {
    let calls = this.#tenantCalls.get(entry.call.tenantId);
    if (calls === undefined) {
      calls = new TenantCalls(this.#levelSizes.length);
      this.#tenantCalls.set(entry.call.tenantId, calls);
    }
    return calls;
  }

  #addToLevel(entry: Entry, level: number): void {
    entry.level = level;
    this.#tenantOf(entry).add(entry, level);
    this.#levelSizes[level] = (this.#levelSizes[level] ?? 0) + 1;
  }

  #removeFromLevel(entry: Entry): void {
    const calls = this.#tenantCalls.get(entry.call.tenantId);
    if (calls === undefined || !calls.delete(entry)) throw new Error(`queue invariant broken: ${entry.call.callId} not in its level`);
    if (calls.size === 0) this.#tenantCalls.delete(entry.call.tenantId);
    this.#levelSizes[entry.level] = (this.#levelSizes[entry.level] ?? 0) - 1;
  }

  #take(entry: Entry): Dequeued {
    this.#removeFromLevel(entry);
    this.#starvation.remove(entry);
    this.#deferred.get(entry.programKey)?.remove(entry);
    this.#byId.delete(entry.call.callId);
    this.#tenants.callLeft(entry.call.tenantId);
    const out = dequeued(entry);
    if (this.#promoted.get(entry.programKey) === entry) {
      this.#promoted.delete(entry.programKey);
      // The program's next starving call takes its place at the top.
      const next = this.#deferred.get(entry.programKey)?.pop();
      if (next !== undefined) this.#promote(next);
    }
    if (this.#deferred.get(entry.programKey)?.size === 0) this.#deferred.delete(entry.programKey);
    return out;
  }

  #promote(entry: Entry): void {
    this.#removeFromLevel(entry);
    this.#addToLevel(entry, 0);
    this.#promoted.set(entry.programKey, entry);
  }

  /**
   * A starving call: promoted, or deferred behind its program's promoted call. The
   * promoted call of a program is always its starving call that starved first
   * (smallest starveAt, then insertion), so the queue's state is a function of the
   * waiting calls and `now`, whatever the history of questions.
   */
  #starve(entry: Entry): void {
    const current = this.#promoted.get(entry.programKey);
    if (current === undefined) {
      this.#promote(entry);
      return;
    }
    let deferred = this.#deferred.get(entry.programKey);
    if (deferred === undefined) {
      deferred = new IndexedHeap<Entry>(starvesBefore, starveSlot);
      this.#deferred.set(entry.programKey, deferred);
    }
    if (starvesBefore(entry, current)) {
      this.#removeFromLevel(current);
      this.#addToLevel(current, current.naturalLevel);
      deferred.push(current);
      this.#promote(entry);
    } else {
      deferred.push(entry);
    }
  }

  /**
   * Moves calls whose starvation instant passed to level 0, one per program: a
   * program's further starving calls wait behind its promoted one (promotion is by
   * program, so a wide program cannot flood the top level).
   */
  #applyStarvation(now: number): void {
    if (!Number.isFinite(now)) throw new RangeError(`now must be finite, got ${now}`);
    if (now < this.#promotedThrough) this.#undoPromotions();
    this.#promotedThrough = now;
    // starveAt and the ratio are computed differently, so they may disagree by a few
    // ulps: pop with a little slack and let the ratio (the rule) decide.
    const slack = 1e-9 + 1e-12 * Math.abs(now);
    const notYet: Entry[] = [];
    for (let top = this.#starvation.peek(); top !== undefined && top.starveAt <= now + slack; top = this.#starvation.peek()) {
      this.#starvation.pop();
      if (isStarving(top.call, now, this.settings)) this.#starve(top);
      else notYet.push(top);
    }
    for (const entry of notYet) this.#starvation.push(entry);
  }

  /** Asked about an earlier time: promotions that no longer hold are undone. */
  #undoPromotions(): void {
    const starving: Entry[] = [];
    for (const entry of [...this.#promoted.values()]) {
      this.#promoted.delete(entry.programKey);
      this.#removeFromLevel(entry);
      this.#addToLevel(entry, entry.naturalLevel);
      starving.push(entry);
    }
    for (const deferred of this.#deferred.values()) for (const entry of deferred.items()) starving.push(entry);
    for (const entry of starving) this.#deferred.get(entry.programKey)?.remove(entry);
    this.#deferred.clear();
    // Every one of them goes back under the starvation rule, which re-promotes those that still starve.
    for (const entry of starving) this.#starvation.push(entry);
  }
}

function dequeued(entry: Entry): Dequeued {
  return { call: entry.call, level: entry.level, promoted: entry.level !== entry.naturalLevel, naturalLevel: entry.naturalLevel };
}
