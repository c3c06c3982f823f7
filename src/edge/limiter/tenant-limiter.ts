import { DurableObject } from "cloudflare:workers";
import { and, eq, inArray } from "drizzle-orm";
import { z } from "zod";
import { database } from "../db/client.js";
import { programs } from "../db/schema.js";
import type { Env } from "../env.js";
import { adjust, type Bucket, fullBucket, msUntil, msUntilFull, RATE_WINDOW_MS, refill } from "../limits/bucket.js";
import { periodOf } from "../limits/period.js";
import { decideOutputTokens, defaultOutputTokens } from "../limits/max-tokens.js";
import type { TenantLimits } from "../limits/plan-limits.js";
import { loadTenant } from "../auth/tenant-profile.js";
import { countedObjectD1 } from "../instrument/io-counts.js";
import type { AuthenticatedTenant } from "../context.js";
import { AuthStore, type StoredProfile } from "./auth-store.js";
import { limiterShard } from "./access.js";
import { budgetGrant, shardCount, shardLimits } from "./shards.js";
import { type BucketName, LimiterStore } from "./store.js";
import {
  AuthenticateInput,
  type AuthenticateResult,
  type AuthRefusal,
  type KeyCredential,
  RefreshProfileInput,
  type RefreshProfileResult,
  AdmitCallInput,
  AdmitProgramInput,
  type AdmitProgramResult,
  type AdmitResult,
  AdmitToolEventsInput,
  type AdmitToolEventsResult,
  GrantBudgetInput,
  CancelLeaseInput,
  type CancelLeaseResult,
  type LimiterSnapshot,
  PeekInput,
  type Refusal,
  ReleaseProgramInput,
  RenewLeaseInput,
  SettleLeaseInput,
  WasAdmittedInput,
  type SettleLeaseResult,
} from "./types.js";

/**
 * A call's concurrency slot and reservation are held by a lease this long. The
 * edge renews it every LEASE_RENEW_MS while the call runs, so only a call whose
 * edge invocation died loses it: its slot is back within LEASE_MS.
 */
export const LEASE_MS = 120_000;
export const LEASE_RENEW_MS = 40_000;
/**
 * Settled, expired and cancelled leases are kept this long so a repeated or
 * late settle is recognised (never charged or refunded twice). Longer than the
 * ProgramSession's reaping of unsettled calls (CALL_TIMEOUT_MS, at most 30 min,
 * plus CALL_REAP_GRACE_MS), after which late settles are ignored everywhere.
 */
export const CLOSED_LEASE_RETENTION_MS = 60 * 60_000;
/** Closed leases are purged in batches, at most this often. */
const PURGE_EVERY_MS = 10 * 60_000;
/** A program admitted this recently may not have its D1 row yet: reconciliation leaves it alone. */
export const PROGRAM_GRACE_MS = 60_000;
/** At most one D1 reconciliation of active programs this often. */
const RECONCILE_EVERY_MS = 60_000;
/**
 * Retry hints where no exact time is known: a slot frees when any call ends (and so
 * does budget held by a call in flight); programs end or idle out in minutes.
 */
const CONCURRENCY_RETRY_MS = 1_000;
const BUDGET_HELD_RETRY_MS = 1_000;
const ACTIVE_PROGRAMS_RETRY_MS = 60_000;
/** D1 binds at most 100 parameters a statement. */
const D1_IN_CHUNK = 90;
/** api_keys.last_used_at is a hint, not an audit log: it is refreshed at most this often. */
export const LAST_USED_GRANULARITY_MS = 60_000;

const BUDGET_REFUSALS: ReadonlySet<string> = new Set(["budget_exhausted", "budget_held", "max_tokens_exceeds_budget"]);

type ProfileLoad = { ok: true; stored: StoredProfile } | { ok: false; reason: "not_found" | "plan_missing"; planId?: string };

interface Admission {
  now: number;
  limits: TenantLimits;
  /** A shard of a sharded tenant: the budget it reserves against is what shard 0 granted it, not the tenant's whole budget. */
  budgetGranted?: true;
  call?: { callId: string; promptTokens: number; maxTokens: number | undefined };
  programId?: string;
}

/** What an admitted call takes: its completion limit and its reservation (prompt + that limit). */
interface Reservation {
  maxTokens: number;
  reserveTokens: number;
}

type Decision =
  | { ok: true; snapshot: LimiterSnapshot; reservation: Reservation | undefined }
  | { ok: false; refusal: Refusal; snapshot: LimiterSnapshot };

/**
 * One per tenant (named by tenant ID): requests and tokens per minute (token
 * buckets refilled continuously over 60 s), calls in flight (leases that
 * expire), active programs, and the token budget of the calendar month (UTC).
 *
 * Admission RESERVES: it checks every limit and, only if all pass, takes one
 * request, the call's token reservation (prompt estimate + max tokens) and a
 * lease, in one synchronous SQLite transaction, so parallel admissions are
 * strictly ordered and a burst cannot overspend. Settling charges the actual
 * tokens and gives back the rest; it is idempotent on the call ID.
 */
export class TenantLimiter extends DurableObject<Env> {
  private readonly store: LimiterStore;
  private readonly auth: AuthStore;
  /** The load of a profile this object does not hold yet, shared by the calls that wait for it. */
  private firstLoad: Promise<ProfileLoad> | undefined;
  /** Profile loads begun, and the latest whose answer was stored: an older answer arriving later is dropped. */
  private loadsBegun = 0;
  private loadApplied = 0;
  private alarmAt: number | null = null;
  /**
   * The limits row as this object last wrote or read it (it is the row's only
   * writer): spares a JSON parse and schema check at every settle, and a write
   * at every admission whose limits did not change.
   */
  private knownLimits: { json: string; limits: TenantLimits } | undefined;
  /** A sharded tenant's shard: its ask to shard 0 for budget in flight, shared by the admissions that wait for it. */
  private budgetAsk: Promise<void> | undefined;
  /** When D1 was last asked which admitted programs are still active (in memory: losing it only costs one extra check). */
  private lastReconcileAt: number | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new LimiterStore(ctx.storage.sql);
    this.auth = new AuthStore(ctx.storage.sql);
    void ctx.blockConcurrencyWhile(async () => {
      this.store.initialise();
      this.auth.initialise();
      this.alarmAt = await ctx.storage.getAlarm();
    });
  }

  /**
   * Verifies a key of this object's tenant and answers the tenant's profile, from this
   * object's storage: no D1 read, except the one-time load of a profile it does not hold.
   * A wrong, revoked or unknown key: invalid_key.
   */
  async authenticate(raw: AuthenticateInput): Promise<AuthenticateResult> {
    const { tenantId, keyHash, now } = AuthenticateInput.parse(raw);
    const checked = await this.checkCredential({ tenantId, keyHash }, now);
    if (!checked.ok) return checked;
    return { ok: true, tenant: checked.tenant, version: checked.stored.version, keyUsed: checked.keyUsed };
  }

  /**
   * Reloads the tenant's profile and keys from D1 (the admin API calls this after every
   * change to the tenant, its plan or its keys, before it answers), so a revocation or a
   * plan change applies from the tenant's next request.
   */
  async refreshProfile(raw: RefreshProfileInput): Promise<RefreshProfileResult> {
    const { tenantId } = RefreshProfileInput.parse(raw);
    const loaded = await this.loadProfile(tenantId);
    return loaded.ok
      ? { ok: true, version: loaded.stored.version, shards: this.auth.mostShards() }
      : { ok: false, reason: loaded.reason };
  }

  /** Admits a call (and, with newProgramId, the program it starts), or says which limit refused it. */
  async admitCall(raw: AdmitCallInput): Promise<AdmitResult> {
    const parsed = AdmitCallInput.safeParse(raw);
    if (!parsed.success) return { ok: false, refusal: "invalid_input", detail: z.prettifyError(parsed.error) };
    const input = parsed.data;
    let limits = input.limits;
    let keyUsed: boolean | undefined;
    if (input.auth) {
      const checked = await this.checkCredential(input.auth, input.now);
      if (!checked.ok) return checked;
      if (checked.stored.version !== input.auth.profileVersion) {
        return { ok: false, refusal: "profile_changed", tenant: checked.tenant, version: checked.stored.version };
      }
      limits = checked.stored.profile.limits;
      keyUsed = checked.keyUsed;
    }
    if (!limits) return { ok: false, refusal: "invalid_input", detail: "no limits" };
    const shard = input.shard;
    if (shard && shard.index >= shard.count) return { ok: false, refusal: "invalid_input", detail: "shard index ≥ shard count" };
    if (shard && shard.index !== 0 && input.newProgramId) {
      return { ok: false, refusal: "invalid_input", detail: "a call that starts a program is admitted by shard 0 (it counts programs)" };
    }
    if (shard && limits.monthlyTokenBudget !== null) await this.topUpBudget(shard, limits, input);
    const admission: Admission = {
      now: input.now,
      limits: shard ? shardLimits(limits, shard.index, shard.count) : limits,
      ...(shard ? { budgetGranted: true as const } : {}),
      call: { callId: input.callId, promptTokens: input.promptTokens, maxTokens: input.maxTokens },
      ...(input.newProgramId ? { programId: input.newProgramId } : {}),
    };
    const decision = await this.admitWithReconcile(admission);
    await this.scheduleAlarm();
    if (!decision.ok) {
      const budget = limits.monthlyTokenBudget;
      // A shard's budget refusal names the tenant's budget, not this shard's grant.
      if (shard && budget !== null && BUDGET_REFUSALS.has(decision.refusal.reason)) {
        return { ...decision, refusal: { ...decision.refusal, limit: budget } };
      }
      return decision;
    }
    if (!decision.reservation) throw new Error("admitCall: an admitted call without a reservation");
    return {
      ok: true,
      ...(keyUsed !== undefined ? { keyUsed } : {}),
      snapshot: decision.snapshot,
      leaseExpiresAt: input.now + LEASE_MS,
      maxTokens: decision.reservation.maxTokens,
      reservedTokens: decision.reservation.reserveTokens,
    };
  }

  /**
   * Takes `count` tool events from the tenant's bucket (toolEventsPerMinute, refilled
   * over 60 s), all or none: the tenant-wide cap on tool events, on top of each
   * program's own. One synchronous transaction; touches nothing else.
   */
  async admitToolEvents(raw: AdmitToolEventsInput): Promise<AdmitToolEventsResult> {
    const parsed = AdmitToolEventsInput.safeParse(raw);
    if (!parsed.success) return { ok: false, refusal: "invalid_input", detail: z.prettifyError(parsed.error) };
    const { now, limits, count } = parsed.data;
    const capacity = limits.toolEventsPerMinute;
    return this.ctx.storage.transactionSync((): AdmitToolEventsResult => {
      const bucket = refill(this.bucket("tool_events", capacity, now), capacity, now);
      if (bucket.level < count) {
        // A batch larger than the whole bucket waits for a full one (the admin API keeps capacity ≥ a batch).
        return { ok: false, retryAfterMs: msUntil(bucket, capacity, Math.min(count, capacity)), limitPerMinute: capacity };
      }
      const after = adjust(bucket, capacity, -count);
      this.store.writeBucket("tool_events", after);
      return { ok: true, remaining: Math.floor(after.level) };
    });
  }

  /**
   * Shard 0 of a sharded tenant: grants up to `want` tokens of the period's budget to a
   * shard, never more than the budget minus what it already granted (shards.ts: the bound).
   */
  async grantBudget(raw: GrantBudgetInput): Promise<number> {
    return this.grantLocally(GrantBudgetInput.parse(raw));
  }

  /** Admits a program created on its own (POST /v1/programs): only the active-programs limit applies. */
  async admitProgram(raw: AdmitProgramInput): Promise<AdmitProgramResult> {
    const parsed = AdmitProgramInput.safeParse(raw);
    if (!parsed.success) return { ok: false, refusal: "invalid_input", detail: z.prettifyError(parsed.error) };
    const decision = await this.admitWithReconcile(parsed.data);
    return decision.ok ? { ok: true } : { ok: false, refusal: decision.refusal };
  }

  /**
   * Charges what the call used and releases the rest of its reservation and its
   * slot. Idempotent: a repeat answers already_settled and changes nothing. A
   * lease that expired meanwhile is still charged (the ledger records the call too).
   */
  async settleLease(raw: SettleLeaseInput): Promise<SettleLeaseResult> {
    const parsed = SettleLeaseInput.safeParse(raw);
    if (!parsed.success) return { settled: false, reason: "invalid_input", detail: z.prettifyError(parsed.error) };
    const { callId, tokens, finishedAt } = parsed.data;
    const result = this.ctx.storage.transactionSync((): SettleLeaseResult => {
      const lease = this.store.lease(callId);
      if (!lease) return { settled: false, reason: "unknown_call" };
      if (lease.state === "settled" || lease.state === "cancelled") return { settled: false, reason: "already_settled" };
      const limits = this.limits();
      if (limits) {
        const bucket = refill(this.bucket("tokens", limits.tpm, finishedAt), limits.tpm, finishedAt);
        this.store.writeBucket("tokens", adjust(bucket, limits.tpm, lease.reserved - tokens));
      }
      this.store.addPeriodUsage(periodOf(finishedAt).key, tokens);
      this.store.closeLease(callId, "settled", finishedAt);
      return { settled: true, expired: lease.state === "expired" };
    });
    await this.scheduleAlarm();
    return result;
  }

  /**
   * A call admitted but never sent to the pool (its program refused it, or
   * could not be created): gives back its request, its reservation and its slot.
   */
  async cancelLease(raw: CancelLeaseInput): Promise<CancelLeaseResult> {
    const parsed = CancelLeaseInput.safeParse(raw);
    if (!parsed.success) return { cancelled: false, reason: "invalid_input", snapshot: null };
    const { callId, now, releaseProgramId } = parsed.data;
    const result = this.ctx.storage.transactionSync((): CancelLeaseResult => {
      if (releaseProgramId) this.store.removeProgram(releaseProgramId);
      const lease = this.store.lease(callId);
      const limits = this.limits();
      const snapshot = () => (limits ? this.snapshot(limits, now) : null);
      if (!lease) return { cancelled: false, reason: "unknown_call", snapshot: snapshot() };
      if (lease.state !== "active") return { cancelled: false, reason: "not_active", snapshot: snapshot() };
      if (limits) {
        const requests = refill(this.bucket("requests", limits.rpm, now), limits.rpm, now);
        this.store.writeBucket("requests", adjust(requests, limits.rpm, 1));
        const tokens = refill(this.bucket("tokens", limits.tpm, now), limits.tpm, now);
        this.store.writeBucket("tokens", adjust(tokens, limits.tpm, lease.reserved));
      }
      this.store.closeLease(callId, "cancelled", now);
      return { cancelled: true, snapshot: snapshot() };
    });
    await this.scheduleAlarm();
    return result;
  }

  /**
   * Shard 0: the most shards the tenant's profile ever gave it (shards.ts), so a call's
   * admission can be looked up on every shard that may have granted it.
   */
  async shardsEverUsed(): Promise<number> {
    return this.auth.mostShards();
  }

  /** Whether this object ever admitted the call (its lease is kept CLOSED_LEASE_RETENTION_MS after it closed). */
  async wasAdmitted(raw: WasAdmittedInput): Promise<boolean> {
    const { callId } = WasAdmittedInput.parse(raw);
    return this.store.lease(callId) !== undefined;
  }

  /** Extends an active lease to now + LEASE_MS; false when it is no longer active. */
  async renewLease(raw: RenewLeaseInput): Promise<boolean> {
    const { callId, now } = RenewLeaseInput.parse(raw);
    const lease = this.store.lease(callId);
    if (lease?.state !== "active") return false;
    this.store.extendLease(callId, now + LEASE_MS);
    await this.scheduleAlarm();
    return true;
  }

  /** The limits as they stand, without taking anything (for responses refused before admission). */
  async peek(raw: PeekInput): Promise<LimiterSnapshot> {
    const { now, limits } = PeekInput.parse(raw);
    return this.snapshot(limits, now);
  }

  /** A program ended or expired: its slot is free. Idempotent. */
  async releaseProgram(raw: ReleaseProgramInput): Promise<void> {
    const { programId } = ReleaseProgramInput.parse(raw);
    this.store.removeProgram(programId);
  }

  /** Expires leases whose edge stopped renewing them, and purges what no settle can need any more. */
  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      this.store.expireLeases(now);
      this.store.purgeClosedBefore(now - CLOSED_LEASE_RETENTION_MS);
      // Late settles land in their own period; nothing reads periods before the previous one.
      this.store.purgePeriodsBefore(periodOf(periodOf(now).startMs - 1).key);
      this.store.purgeBudgetGrantsBefore(periodOf(periodOf(now).startMs - 1).key);
    });
    await this.scheduleAlarm();
  }

  // ------------------------------------------------------------------ internals

  private grantLocally({ period, shard, count, need, budget }: GrantBudgetInput): number {
    return this.ctx.storage.transactionSync(() => {
      const give = budgetGrant(budget - this.store.grantedIn(period), count, need);
      if (give > 0) this.store.addGrant(period, shard, give);
      return give;
    });
  }

  /**
   * A shard whose grant cannot hold this call (prompt + its completion limit) asks shard 0
   * for a chunk first. The decision after it re-reads everything in one transaction, so
   * admissions that ran during the ask are counted; a failed ask only means a refusal.
   */
  private async topUpBudget(shard: { tenantId: string; index: number; count: number }, limits: TenantLimits, input: AdmitCallInput): Promise<void> {
    const budget = limits.monthlyTokenBudget;
    if (budget === null) return;
    const period = periodOf(input.now).key;
    const needed = input.promptTokens + (input.maxTokens ?? defaultOutputTokens(limits));
    const free = () => this.store.allowance(period) - this.store.periodUsage(period) - this.store.reservedIn(period);
    // Admissions arriving during an ask wait for it rather than each asking (a burst would take the whole budget to one shard).
    for (let round = 0; round < 2 && free() < needed; round++) {
      this.budgetAsk ??= this.askForBudget(shard, { period, need: needed - Math.max(0, free()), budget }).finally(() => {
        this.budgetAsk = undefined;
      });
      await this.budgetAsk;
    }
  }

  private async askForBudget(
    shard: { tenantId: string; index: number; count: number },
    ask: { period: string; need: number; budget: number },
  ): Promise<void> {
    const request = { ...ask, shard: shard.index, count: shard.count };
    let granted: number;
    try {
      granted = shard.index === 0 ? this.grantLocally(request) : await limiterShard(this.env, shard.tenantId, 0).grantBudget(request);
    } catch (error) {
      console.error(`shard ${shard.index} of ${shard.tenantId}: asking shard 0 for budget failed`, error);
      return;
    }
    // Granted tokens not stored (this object failing now) are lost to the tenant this period: under-spend, never over.
    if (granted > 0) this.store.addAllowance(ask.period, granted);
  }

  /** The key checked against this object's copy of the tenant's keys (loaded once if it has none). */
  private async checkCredential(
    credential: KeyCredential,
    now: number,
  ): Promise<{ ok: true; stored: StoredProfile; tenant: AuthenticatedTenant; keyUsed: boolean } | AuthRefusal> {
    let stored = this.auth.profile();
    if (!stored) {
      this.firstLoad ??= this.loadProfile(credential.tenantId).finally(() => {
        this.firstLoad = undefined;
      });
      const loaded = await this.firstLoad;
      if (!loaded.ok) {
        if (loaded.reason === "plan_missing") return { ok: false, refusal: "plan_missing", planId: loaded.planId ?? "" };
        return { ok: false, refusal: "invalid_key" };
      }
      stored = loaded.stored;
    }
    // The object is named by the tenant ID the key carries; a profile of another tenant here would be a routing bug.
    if (stored.profile.id !== credential.tenantId) return { ok: false, refusal: "invalid_key" };
    const key = this.auth.checkKey(credential.keyHash);
    if (!key.ok) return { ok: false, refusal: "invalid_key" };
    const keyUsed = key.lastUsedAt === null || now - key.lastUsedAt >= LAST_USED_GRANULARITY_MS;
    if (keyUsed) this.auth.markUsed(credential.keyHash, now);
    return { ok: true, stored, tenant: { ...stored.profile, keyId: key.keyId }, keyUsed };
  }

  /**
   * Reads the profile and keys from D1 and stores them. Loads may overlap (an admin
   * change during a first load): only an answer to a load begun after the last stored
   * one is stored, so a read that began before a change cannot overwrite it.
   */
  private async loadProfile(tenantId: string): Promise<ProfileLoad> {
    this.loadsBegun += 1;
    const load = this.loadsBegun;
    const loaded = await loadTenant(database(countedObjectD1(this.env)), tenantId);
    if (!loaded.found) {
      if ("planMissing" in loaded) {
        console.error(`Tenant ${tenantId} is on plan "${loaded.planMissing}", which does not exist.`);
        return { ok: false, reason: "plan_missing", planId: loaded.planMissing };
      }
      return { ok: false, reason: "not_found" };
    }
    const current = this.auth.profile();
    if (load < this.loadApplied && current) return { ok: true, stored: current };
    this.loadApplied = load;
    const stored = this.ctx.storage.transactionSync(() => {
      this.auth.writeKeys(loaded.keys);
      this.auth.noteShards(shardCount(loaded.profile.limits));
      return this.auth.writeProfile(loaded.profile);
    });
    return { ok: true, stored };
  }

  /**
   * When only the active-programs limit refused, checks D1 for programs that
   * ended without telling this object (their release was lost) and tries again.
   */
  private async admitWithReconcile(admission: Admission): Promise<Decision> {
    const first = this.decide(admission);
    if (first.ok || first.refusal.reason !== "active_programs_limit") return first;
    if (!(await this.reconcilePrograms(admission.now))) return first;
    return this.decide(admission);
  }

  private async reconcilePrograms(now: number): Promise<boolean> {
    // A tenant hammering at its limit must not turn every refusal into D1 reads.
    if (this.lastReconcileAt !== null && now - this.lastReconcileAt < RECONCILE_EVERY_MS) return false;
    const candidates = this.store.programsAdmittedBy(now - PROGRAM_GRACE_MS);
    if (candidates.length === 0) return false;
    this.lastReconcileAt = now;
    const db = database(countedObjectD1(this.env));
    const stillActive = new Set<string>();
    for (let i = 0; i < candidates.length; i += D1_IN_CHUNK) {
      const chunk = candidates.slice(i, i + D1_IN_CHUNK);
      const rows = await db
        .select({ id: programs.id })
        .from(programs)
        .where(and(inArray(programs.id, chunk), eq(programs.status, "active")));
      for (const row of rows) stillActive.add(row.id);
    }
    // A program's D1 status only moves away from "active", so removing these is safe whatever ran meanwhile.
    const gone = candidates.filter((id) => !stillActive.has(id));
    this.ctx.storage.transactionSync(() => {
      for (const id of gone) this.store.removeProgram(id);
    });
    return gone.length > 0;
  }

  /** Checks every limit, then takes what the admission needs, all in one transaction. */
  private decide(admission: Admission): Decision {
    const { now, limits, call, programId } = admission;
    const limitsJson = JSON.stringify(limits);
    const decision = this.ctx.storage.transactionSync((): Decision => {
      this.store.expireLeases(now);
      if (this.limitsRow()?.json !== limitsJson) this.store.writeLimits(limits);
      const requests = refill(this.bucket("requests", limits.rpm, now), limits.rpm, now);
      const tokens = refill(this.bucket("tokens", limits.tpm, now), limits.tpm, now);
      const checked = this.firstRefusal(admission, requests, tokens);
      if (!checked.ok) return { ok: false, refusal: checked.refusal, snapshot: this.snapshotOf(limits, now, requests, tokens) };
      const { reservation } = checked;

      let requestsAfter = requests;
      let tokensAfter = tokens;
      if (call && reservation) {
        requestsAfter = adjust(requests, limits.rpm, -1);
        tokensAfter = adjust(tokens, limits.tpm, -reservation.reserveTokens);
        this.store.writeBucket("requests", requestsAfter);
        this.store.writeBucket("tokens", tokensAfter);
        this.store.addLease({
          callId: call.callId,
          reserved: reservation.reserveTokens,
          period: periodOf(now).key,
          admittedAt: now,
          expiresAt: now + LEASE_MS,
        });
      }
      if (programId) this.store.addProgram(programId, now);
      return { ok: true, snapshot: this.snapshotOf(limits, now, requestsAfter, tokensAfter), reservation };
    });
    // Only once committed: a transaction that threw was rolled back, the row with it.
    this.knownLimits = { json: limitsJson, limits };
    return decision;
  }

  /** The limits of the latest admission (used to cap refunds at settle and cancel). */
  private limits(): TenantLimits | undefined {
    return this.limitsRow()?.limits;
  }

  private limitsRow(): { json: string; limits: TenantLimits } | undefined {
    if (!this.knownLimits) {
      const limits = this.store.limits();
      if (limits) this.knownLimits = { json: JSON.stringify(limits), limits };
    }
    return this.knownLimits;
  }

  /**
   * Checks every limit in order: the completion limit against the plan's maximum and
   * the budget (which also decides the call's effective limit), a reservation larger
   * than the whole tpm, concurrency, active programs, rpm, tpm.
   */
  private firstRefusal(
    admission: Admission,
    requests: Bucket,
    tokens: Bucket,
  ): { ok: true; reservation: Reservation | undefined } | { ok: false; refusal: Refusal } {
    const { now, limits, call, programId } = admission;
    let reservation: Reservation | undefined;
    if (call) {
      const period = periodOf(now);
      const budgeted = limits.monthlyTokenBudget !== null;
      const output = decideOutputTokens({
        promptTokens: call.promptTokens,
        requested: call.maxTokens,
        // A shard reserves against its grant: settled + held ≤ granted, the single object's invariant on its grant.
        limits: admission.budgetGranted && budgeted ? { ...limits, monthlyTokenBudget: this.store.allowance(period.key) } : limits,
        settled: budgeted ? this.store.periodUsage(period.key) : 0,
        held: budgeted ? this.store.reservedIn(period.key) : 0,
      });
      if (!output.ok) {
        if (output.reason === "max_tokens_above_plan") {
          return { ok: false, refusal: { reason: output.reason, retryAfterMs: 0, limit: output.limit, requested: output.requested } };
        }
        return {
          ok: false,
          refusal: {
            reason: output.reason,
            retryAfterMs: output.reason === "budget_exhausted" ? period.endMs - now : BUDGET_HELD_RETRY_MS,
            limit: output.limit,
            requested: output.requested,
            available: Math.max(0, output.available),
            promptTokens: call.promptTokens,
            held: output.held,
            fits: output.fits,
          },
        };
      }
      reservation = { maxTokens: output.maxTokens, reserveTokens: call.promptTokens + output.maxTokens };
      const reserve = reservation.reserveTokens;
      if (reserve > limits.tpm) {
        return {
          ok: false,
          refusal: { reason: "request_exceeds_tokens_per_minute", retryAfterMs: RATE_WINDOW_MS, limit: limits.tpm, requested: reserve },
        };
      }
      const inFlight = this.store.activeLeaseCount();
      if (inFlight >= limits.maxConcurrent) {
        return {
          ok: false,
          refusal: { reason: "concurrency_limit", retryAfterMs: CONCURRENCY_RETRY_MS, limit: limits.maxConcurrent, available: 0 },
        };
      }
    }
    if (programId && this.store.activeProgramCount() >= limits.maxActivePrograms) {
      return {
        ok: false,
        refusal: { reason: "active_programs_limit", retryAfterMs: ACTIVE_PROGRAMS_RETRY_MS, limit: limits.maxActivePrograms, available: 0 },
      };
    }
    if (reservation) {
      if (requests.level < 1) {
        return {
          ok: false,
          refusal: { reason: "requests_per_minute", retryAfterMs: msUntil(requests, limits.rpm, 1), limit: limits.rpm, available: 0 },
        };
      }
      if (tokens.level < reservation.reserveTokens) {
        return {
          ok: false,
          refusal: {
            reason: "tokens_per_minute",
            retryAfterMs: msUntil(tokens, limits.tpm, reservation.reserveTokens),
            limit: limits.tpm,
            requested: reservation.reserveTokens,
            available: Math.max(0, Math.floor(tokens.level)),
          },
        };
      }
    }
    return { ok: true, reservation };
  }

  private bucket(name: BucketName, capacity: number, now: number): Bucket {
    return this.store.bucket(name) ?? fullBucket(capacity, now);
  }

  private snapshot(limits: TenantLimits, now: number): LimiterSnapshot {
    const requests = refill(this.bucket("requests", limits.rpm, now), limits.rpm, now);
    const tokens = refill(this.bucket("tokens", limits.tpm, now), limits.tpm, now);
    return this.snapshotOf(limits, now, requests, tokens);
  }

  private snapshotOf(limits: TenantLimits, now: number, requests: Bucket, tokens: Bucket): LimiterSnapshot {
    const period = periodOf(now);
    return {
      requests: {
        limit: limits.rpm,
        remaining: Math.max(0, Math.floor(requests.level)),
        resetMs: msUntilFull(requests, limits.rpm),
      },
      tokens: {
        limit: limits.tpm,
        remaining: Math.max(0, Math.floor(tokens.level)),
        resetMs: msUntilFull(tokens, limits.tpm),
      },
      budget: {
        limit: limits.monthlyTokenBudget,
        committed: this.store.periodUsage(period.key) + this.store.reservedIn(period.key),
        period: period.key,
        periodEndMs: period.endMs,
      },
      inFlight: this.store.activeLeaseCount(),
      activePrograms: this.store.activeProgramCount(),
    };
  }

  /** One alarm: the earliest lease expiry, or the next batch purge of closed leases. */
  private async scheduleAlarm(): Promise<void> {
    const deadlines: number[] = [];
    const expiry = this.store.earliestActiveExpiry();
    if (expiry !== undefined) deadlines.push(expiry);
    const oldestClosed = this.store.oldestClosed();
    if (oldestClosed !== undefined) {
      deadlines.push(Math.max(oldestClosed + CLOSED_LEASE_RETENTION_MS, Date.now() + PURGE_EVERY_MS));
    }
    const next = deadlines.length > 0 ? Math.min(...deadlines) : null;
    // An earlier alarm already set still fires and re-plans; only move it when it would fire too late or not at all.
    if (next === null || (this.alarmAt !== null && this.alarmAt <= next)) return;
    await this.ctx.storage.setAlarm(next);
    this.alarmAt = next;
  }
}
