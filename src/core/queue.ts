/*
 * The pool's program-level queue (Autellix PLAS/ATLAS multi-level queue).
 *
 * Order: a call's level is levelOf(program value) (PLAS: attained service; ATLAS:
 * critical path), except that a call whose program is starving, i.e.
 *   (waitMs + (now - enqueuedAt)) / max(value, starvationMinServiceMs) > β,
 * is promoted to level 0. Within a level, tenants are served fairly: the tenant with
 * the smallest decayed service / weight goes first (ties: earliest head call, so
 * tenants with equal shares interleave FCFS), then FCFS (enqueuedAt, then insertion
 * order) within the tenant. A tenant opening many new
 * programs therefore gains nothing: all of them share its one tenant share.
 *
 * Structure, and why it is cheap. Levels change with time only through starvation,
 * and "starving" is monotone in time: a call starves from a fixed instant
 *   starveAt = enqueuedAt - waitMs + β · max(value, floor)
 * on. So each call sits in a FCFS heap per (level, tenant), and calls that may still
 * be promoted also sit in one global heap keyed by starveAt. Before answering at
 * `now`, the queue pops that heap up to `now` and moves those calls to level 0.
 * Tenant shares all decay by the same factor, but are compared at `now` anyway (one
 * Math.pow per tenant in the level scanned), which keeps ties exact.
 *
 * Complexity (n waiting calls, K levels, T tenants with calls in the first non-empty
 * level, p calls whose starvation instant passed since the previous question):
 *   enqueue O(K + log n), remove O(log n), has O(1),
 *   dequeue O(p log n + K + T + log n) when `accept` takes the best call (an
 *     `accept` that refuses it falls back to sorting the levels it scans),
 *   depthByLevel O(K + p log n), peekOrder O(n log n) (inspection only).
 * Promotions are state kept for the latest `now`; a `now` earlier than a previous one
 * (not expected from a monotone clock) undoes the promotions that no longer hold.
 */

import { type HeapSlot, IndexedHeap } from "./indexed-heap.js";
import { levelOf, type LevelSettings, validateLevelSettings } from "./levels.js";
import { TenantShares } from "./tenant-shares.js";

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
  /** Engine that served the program last. */
  affinityEngine?: string;
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

function validateCall(call: QueuedCall): void {
  if (typeof call !== "object" || call === null) throw new TypeError("a queued call must be an object");
  const id = typeof call.callId === "string" ? call.callId : "?";
  const fail = (what: string): never => {
    throw new RangeError(`invalid queued call ${id}: ${what}`);
  };
  for (const key of ["callId", "tenantId", "programId", "threadId"] as const) {
    if (typeof call[key] !== "string" || call[key] === "") fail(`${key} must be a non-empty string`);
  }
  for (const key of ["serviceMs", "pathMs", "waitMs", "promptTokens"] as const) {
    if (!Number.isFinite(call[key]) || call[key] < 0) fail(`${key} must be a finite number >= 0, got ${call[key]}`);
  }
  if (!Number.isFinite(call.weight) || call.weight <= 0) fail(`weight must be a finite number > 0, got ${call.weight}`);
  if (!Number.isFinite(call.enqueuedAt)) fail(`enqueuedAt must be finite, got ${call.enqueuedAt}`);
  if (call.affinityEngine !== undefined && typeof call.affinityEngine !== "string") {
    fail("affinityEngine must be a string when present");
  }
  if (call.remainingMs !== undefined && !(Number.isFinite(call.remainingMs) && call.remainingMs >= 0)) {
    fail(`remainingMs must be a finite number >= 0 when present, got ${call.remainingMs}`);
  }
}

interface Entry {
  readonly call: QueuedCall;
  /** Insertion order, the last FCFS tie-break. */
  readonly seq: number;
  readonly naturalLevel: number;
  /** First instant at which the call may be starving; Infinity when it cannot be promoted. */
  readonly starveAt: number;
  level: number;
  bucketIndex: number;
  starveIndex: number;
}

const fcfsBefore = (a: Entry, b: Entry): boolean =>
  a.call.enqueuedAt < b.call.enqueuedAt || (a.call.enqueuedAt === b.call.enqueuedAt && a.seq < b.seq);

const starvesBefore = (a: Entry, b: Entry): boolean => a.starveAt < b.starveAt || (a.starveAt === b.starveAt && a.seq < b.seq);

const bucketSlot: HeapSlot<Entry> = { get: (e) => e.bucketIndex, set: (e, i) => (e.bucketIndex = i) };
const starveSlot: HeapSlot<Entry> = { get: (e) => e.starveIndex, set: (e, i) => (e.starveIndex = i) };

export class ProgramQueue {
  readonly settings: Readonly<QueueSettings>;
  readonly #byId = new Map<string, Entry>();
  /** Per level: tenant -> that tenant's calls in FCFS order. */
  readonly #levels: Map<string, IndexedHeap<Entry>>[];
  readonly #levelSizes: number[];
  /** Calls not yet promoted that can be, by starveAt. */
  readonly #starvation = new IndexedHeap<Entry>(starvesBefore, starveSlot);
  readonly #promoted = new Set<Entry>();
  readonly #tenants: TenantShares;
  #promotedThrough = Number.NEGATIVE_INFINITY;
  #nextSeq = 0;

  constructor(settings: QueueSettings) {
    validateQueueSettings(settings);
    this.settings = Object.freeze({ ...settings });
    this.#levels = Array.from({ length: settings.levels }, () => new Map<string, IndexedHeap<Entry>>());
    this.#levelSizes = new Array<number>(settings.levels).fill(0);
    this.#tenants = new TenantShares(settings.tenantHalfLifeMs);
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
    const entry: Entry = { call: stored, seq: this.#nextSeq++, naturalLevel, starveAt, level: naturalLevel, bucketIndex: -1, starveIndex: -1 };
    this.#byId.set(stored.callId, entry);
    this.#tenants.callQueued(stored.tenantId, stored.weight);
    this.#addToLevel(entry, naturalLevel);
    if (Number.isFinite(starveAt)) this.#starvation.push(entry);
  }

  remove(callId: string): QueuedCall | undefined {
    const entry = this.#byId.get(callId);
    if (entry === undefined) return undefined;
    this.#take(entry);
    return entry.call;
  }

  dequeue(now: number, accept?: (call: QueuedCall) => boolean): Dequeued | undefined {
    this.#applyStarvation(now);
    // The fast path asks each tenant of one level once; only the fallback needs a cache.
    const shareAt = (tenantId: string) => this.#tenants.share(tenantId, now);
    let shareOf: ((tenantId: string) => number) | undefined;
    for (let level = 0; level < this.#levels.length; level++) {
      const best = this.#bestInLevel(level, shareAt);
      if (best === undefined) continue;
      if (accept === undefined || accept(best.call)) return this.#take(best);
      shareOf ??= this.#shareCache(now);
      for (const entry of this.#orderedLevel(level, shareOf)) {
        if (entry !== best && accept(entry.call)) return this.#take(entry);
      }
    }
    return undefined;
  }

  peekOrder(now: number): Dequeued[] {
    this.#applyStarvation(now);
    const shareOf = this.#shareCache(now);
    const order: Dequeued[] = [];
    for (let level = 0; level < this.#levels.length; level++) {
      for (const entry of this.#orderedLevel(level, shareOf)) order.push({ ...dequeued(entry), call: { ...entry.call } });
    }
    return order;
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

  #shareCache(now: number): (tenantId: string) => number {
    const cache = new Map<string, number>();
    return (tenantId) => {
      let share = cache.get(tenantId);
      if (share === undefined) {
        share = this.#tenants.share(tenantId, now);
        cache.set(tenantId, share);
      }
      return share;
    };
  }

  /** Head call of the fairest tenant in a level. O(tenants in the level). */
  #bestInLevel(level: number, shareOf: (tenantId: string) => number): Entry | undefined {
    let best: Entry | undefined;
    let bestShare = Number.POSITIVE_INFINITY;
    for (const [tenantId, calls] of this.#levelMap(level)) {
      const head = calls.peek();
      if (head === undefined) continue;
      const share = shareOf(tenantId);
      if (best === undefined || share < bestShare || (share === bestShare && fcfsBefore(head, best))) {
        best = head;
        bestShare = share;
      }
    }
    return best;
  }

  /**
   * Every call of a level in the order successive dequeues would take them (shares do
   * not move between dequeues at one `now`): by tenant share, and tenants with equal
   * shares interleaved FCFS, since each pick takes the earliest head among them.
   * O(m log m).
   */
  #orderedLevel(level: number, shareOf: (tenantId: string) => number): Entry[] {
    const ranked: { share: number; entry: Entry }[] = [];
    for (const [tenantId, calls] of this.#levelMap(level)) {
      const share = shareOf(tenantId);
      for (const entry of calls.items()) ranked.push({ share, entry });
    }
    ranked.sort((a, b) => (a.share !== b.share ? (a.share < b.share ? -1 : 1) : fcfsBefore(a.entry, b.entry) ? -1 : 1));
    return ranked.map((r) => r.entry);
  }

  #levelMap(level: number): Map<string, IndexedHeap<Entry>> {
    const map = this.#levels[level];
    if (map === undefined) throw new RangeError(`no level ${level}`);
    return map;
  }

  #addToLevel(entry: Entry, level: number): void {
    const map = this.#levelMap(level);
    let calls = map.get(entry.call.tenantId);
    if (calls === undefined) {
      calls = new IndexedHeap<Entry>(fcfsBefore, bucketSlot);
      map.set(entry.call.tenantId, calls);
    }
    calls.push(entry);
    entry.level = level;
    this.#levelSizes[level] = (this.#levelSizes[level] ?? 0) + 1;
  }

  #removeFromLevel(entry: Entry): void {
    const map = this.#levelMap(entry.level);
    const calls = map.get(entry.call.tenantId);
    if (calls === undefined || !calls.remove(entry)) throw new Error(`queue invariant broken: ${entry.call.callId} not in its level`);
    if (calls.size === 0) map.delete(entry.call.tenantId);
    this.#levelSizes[entry.level] = (this.#levelSizes[entry.level] ?? 0) - 1;
  }

  #take(entry: Entry): Dequeued {
    this.#removeFromLevel(entry);
    this.#starvation.remove(entry);
    this.#promoted.delete(entry);
    this.#byId.delete(entry.call.callId);
    this.#tenants.callLeft(entry.call.tenantId);
    return dequeued(entry);
  }

  #applyStarvation(now: number): void {
    if (!Number.isFinite(now)) throw new RangeError(`now must be finite, got ${now}`);
    if (now < this.#promotedThrough) this.#undoPromotions(now);
    this.#promotedThrough = now;
    // starveAt and the ratio are computed differently, so they may disagree by a few
    // ulps: pop with a little slack and let the ratio (the rule) decide.
    const slack = 1e-9 + 1e-12 * Math.abs(now);
    const notYet: Entry[] = [];
    for (let top = this.#starvation.peek(); top !== undefined && top.starveAt <= now + slack; top = this.#starvation.peek()) {
      this.#starvation.pop();
      if (isStarving(top.call, now, this.settings)) {
        this.#removeFromLevel(top);
        this.#addToLevel(top, 0);
        this.#promoted.add(top);
      } else {
        notYet.push(top);
      }
    }
    for (const entry of notYet) this.#starvation.push(entry);
  }

  #undoPromotions(now: number): void {
    for (const entry of this.#promoted) {
      if (isStarving(entry.call, now, this.settings)) continue;
      this.#removeFromLevel(entry);
      this.#addToLevel(entry, entry.naturalLevel);
      this.#promoted.delete(entry);
      this.#starvation.push(entry);
    }
  }
}

function dequeued(entry: Entry): Dequeued {
  return { call: entry.call, level: entry.level, promoted: entry.level !== entry.naturalLevel, naturalLevel: entry.naturalLevel };
}
