import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { callStartValue, completeCall, type ProgramService } from "../../core/service.js";
import { DEFAULT_THREAD } from "../../protocol/headers.js";
import { type Database, database } from "../db/client.js";
import { recordUsage, writeProgramSummary } from "../db/ledger.js";
import type { Program } from "../db/schema.js";
import { edgeConfig, type Env } from "../env.js";
import { tenantLimiter } from "../limiter/access.js";
import { type CallRecord, type ProgramMeta, ProgramStore } from "./store.js";
import {
  type BeginCallResult,
  BeginCallInput,
  CreateProgramInput,
  EndProgramInput,
  type EndProgramResult,
  type ProgramState,
  type SettleCallResult,
  SettleCallInput,
} from "./types.js";

/** A call begun but never settled (its edge died) is reaped as an error after this long. */
export const CALL_LEASE_MS = 30 * 60_000;
/** Delay before the alarm retries a D1 write that failed. */
export const D1_RETRY_MS = 30_000;

type Outcome = Omit<SettleCallInput, "callId">;

/**
 * One agent program: its PLAS/ATLAS service values, threads, in-flight calls,
 * totals and engine affinity, in the object's own SQLite storage. Named
 * `${tenantId}:${programId}`, so another tenant's program ID reaches an empty
 * object and is answered exactly like an unknown one.
 *
 * Every state change is one synchronous SQLite transaction; D1 writes (the
 * program summary, one usage row per call) follow it and are retried by the
 * alarm if they fail. The single alarm also reaps leaked calls and expires the
 * program after PROGRAM_IDLE_TTL_MS without activity.
 */
export class ProgramSession extends DurableObject<Env> {
  private readonly store: ProgramStore;
  private readonly db: Database;
  /** The program row; undefined until create() ran in this object. */
  private meta: ProgramMeta | undefined;
  private alarmAt: number | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new ProgramStore(ctx.storage.sql);
    this.db = database(env.DB);
    void ctx.blockConcurrencyWhile(async () => {
      if (this.store.exists()) this.store.upgrade();
      this.meta = this.store.readMeta();
      this.alarmAt = this.meta ? await ctx.storage.getAlarm() : null;
    });
  }

  /** Starts the program; idempotent. The first call resolves once D1 holds the program row. */
  async create(raw: CreateProgramInput): Promise<ProgramState> {
    const input = CreateProgramInput.parse(raw);
    if (!this.meta) {
      const meta: ProgramMeta = {
        tenantId: input.tenantId,
        programId: input.programId,
        status: "active",
        createdAt: input.now,
        endedAt: null,
        lastActivityAt: input.now,
        serviceMs: 0,
        pathMs: 0,
        waitMs: 0,
        engine: "",
        calls: 0,
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
        summaryPending: true,
      };
      this.ctx.storage.transactionSync(() => this.store.initialise(meta, DEFAULT_THREAD));
      this.meta = meta;
      try {
        // Usage rows reference the program row, so this write must land first.
        await this.writeSummary();
      } finally {
        await this.scheduleAlarm();
      }
    }
    return this.snapshot(this.meta);
  }

  async beginCall(raw: BeginCallInput): Promise<BeginCallResult> {
    const parsed = BeginCallInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input", detail: z.prettifyError(parsed.error) };
    const input = parsed.data;
    const meta = this.meta;
    if (!meta) return { ok: false, error: "not_found" };
    if (meta.status !== "active") return { ok: false, error: meta.status };
    const next: ProgramMeta = { ...meta, lastActivityAt: Math.max(meta.lastActivityAt, input.now) };
    const result = this.ctx.storage.transactionSync((): BeginCallResult => {
      if (this.store.call(input.callId)) return { ok: false, error: "duplicate_call" };
      const existing = this.store.thread(input.thread);
      if (input.parentThread !== undefined) {
        if (!this.store.thread(input.parentThread)) return { ok: false, error: "unknown_parent" };
        if (existing && existing.parent !== input.parentThread) return { ok: false, error: "parent_mismatch" };
      }
      if (!existing) this.store.addThread(input.thread, input.parentThread ?? null, input.now);
      const startValueMs = callStartValue(serviceOf(meta));
      this.store.addCall({
        callId: input.callId,
        thread: input.thread,
        model: input.model,
        startValueMs,
        startedAt: input.now,
        pool: input.pool,
      });
      this.store.writeMeta(next);
      return {
        ok: true,
        serviceMs: meta.serviceMs,
        pathMs: meta.pathMs,
        waitMs: meta.waitMs,
        engine: meta.engine,
        startValueMs,
      };
    });
    if (!result.ok) return result;
    this.meta = next;
    await this.scheduleAlarm();
    return result;
  }

  /**
   * Settles what a call used: service values, totals, affinity, and its usage
   * row in D1. Idempotent on the call ID: a repeat changes nothing (it only
   * retries the usage row if that write had failed).
   */
  async settleCall(raw: SettleCallInput): Promise<SettleCallResult> {
    const parsed = SettleCallInput.safeParse(raw);
    if (!parsed.success) return { settled: false, reason: "invalid_input", detail: z.prettifyError(parsed.error) };
    const { callId, ...outcome } = parsed.data;
    if (!this.meta) return { settled: false, reason: "not_found" };
    const call = this.store.call(callId);
    if (!call) return { settled: false, reason: "unknown_call" };
    if (call.status !== "in_flight") {
      if (!call.recorded) await this.flushToD1();
      return { settled: false, reason: "already_settled" };
    }
    this.applySettle(call, outcome, { activity: true });
    await this.flushToD1();
    await this.scheduleAlarm();
    return { settled: true };
  }

  async state(): Promise<ProgramState | null> {
    return this.meta ? this.snapshot(this.meta) : null;
  }

  /**
   * Ends the program: D1 gets its final summary and the object keeps only the
   * program row (to answer GET with status "ended") and calls still in flight
   * (they settle into the summary when they finish). Idempotent.
   */
  async end(raw: EndProgramInput): Promise<EndProgramResult> {
    const input = EndProgramInput.parse(raw);
    if (!this.meta) return { ok: false, error: "not_found" };
    if (this.meta.status === "active") {
      this.finish("ended", input.now);
      await this.flushToD1();
      await this.releaseProgramSlot();
      await this.scheduleAlarm();
    }
    return { ok: true, state: this.snapshot(this.meta) };
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    const meta = this.meta;
    if (!meta) return;
    const now = Date.now();
    for (const call of this.store.inFlightStartedBy(now - CALL_LEASE_MS)) {
      const reaped: Outcome = {
        status: "error",
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
        serviceMs: 0,
        queueMs: 0,
        engine: "",
        finishedAt: now,
      };
      this.applySettle(call, reaped, { activity: false });
    }
    const idleTtlMs = edgeConfig(this.env).programIdleTtlMs;
    const current = this.meta ?? meta;
    const expiring =
      current.status === "active" && this.store.inFlightCount() === 0 && now >= current.lastActivityAt + idleTtlMs;
    if (expiring) this.finish("expired", now);
    await this.flushToD1();
    if (expiring) await this.releaseProgramSlot();
    await this.scheduleAlarm();
  }

  private applySettle(call: CallRecord, outcome: Outcome, options: { activity: boolean }): void {
    const meta = this.requireMeta();
    const service = completeCall(serviceOf(meta), call.startValueMs, outcome.serviceMs);
    const next: ProgramMeta = {
      ...meta,
      serviceMs: service.attainedServiceMs,
      pathMs: service.criticalPathMs,
      waitMs: meta.waitMs + outcome.queueMs,
      engine: outcome.engine || meta.engine,
      calls: meta.calls + 1,
      promptTokens: meta.promptTokens + outcome.promptTokens,
      cachedTokens: meta.cachedTokens + outcome.cachedTokens,
      completionTokens: meta.completionTokens + outcome.completionTokens,
      lastActivityAt: options.activity ? Math.max(meta.lastActivityAt, outcome.finishedAt) : meta.lastActivityAt,
      // Once ended, D1's summary is final and must follow late settles.
      summaryPending: meta.summaryPending || meta.status !== "active",
    };
    this.ctx.storage.transactionSync(() => {
      this.store.finishCall(call.callId, outcome);
      this.store.countThreadCall(call.thread, outcome.serviceMs);
      this.store.writeMeta(next);
    });
    this.meta = next;
  }

  private finish(status: "ended" | "expired", at: number): void {
    const next: ProgramMeta = { ...this.requireMeta(), status, endedAt: at, summaryPending: true };
    this.ctx.storage.transactionSync(() => {
      this.store.writeMeta(next);
      this.store.cleanUp();
    });
    this.meta = next;
  }

  /**
   * Pushes pending D1 writes: the summary first (usage rows reference it), then
   * usage rows. A failure is logged and left for the alarm to retry.
   */
  private async flushToD1(): Promise<void> {
    try {
      if (this.requireMeta().summaryPending) await this.writeSummary();
      for (const call of this.store.unrecordedCalls()) {
        await this.recordCall(call);
      }
      if (this.requireMeta().status !== "active") this.store.cleanUp();
    } catch (error) {
      console.error("ProgramSession: D1 write failed, will retry", error);
    }
  }

  /**
   * Frees the program's slot in its tenant's active-programs limit. Best
   * effort: if this is lost, the limiter finds the program ended in D1 when
   * the tenant next reaches its limit.
   */
  private async releaseProgramSlot(): Promise<void> {
    const meta = this.requireMeta();
    try {
      await tenantLimiter(this.env, meta.tenantId).releaseProgram({ programId: meta.programId });
    } catch (error) {
      console.error("ProgramSession: releasing the program's limiter slot failed", error);
    }
  }

  private async writeSummary(): Promise<void> {
    const written = this.requireMeta();
    const summary = summaryOf(written);
    await writeProgramSummary(this.db, summary);
    const now = this.requireMeta();
    // A settle during the write may have changed the figures: then it stays pending.
    if (JSON.stringify(summaryOf(now)) === JSON.stringify(summary)) {
      const next = { ...now, summaryPending: false };
      this.store.writeMeta(next);
      this.meta = next;
    }
  }

  private async recordCall(call: CallRecord): Promise<void> {
    const meta = this.requireMeta();
    if (call.status === "in_flight" || call.finishedAt === null) return;
    await recordUsage(this.db, {
      callId: call.callId,
      tenantId: meta.tenantId,
      programId: meta.programId,
      thread: call.thread,
      model: call.model,
      engine: call.engine,
      promptTokens: call.promptTokens,
      cachedTokens: call.cachedTokens,
      completionTokens: call.completionTokens,
      serviceMs: call.serviceMs,
      queueMs: call.queueMs,
      status: call.status,
      startedAt: call.startedAt,
      finishedAt: call.finishedAt,
      pool: call.pool,
    });
    this.store.markRecorded(call.callId);
  }

  /** One alarm for everything: idle expiry, the oldest lease, or a D1 retry. */
  private async scheduleAlarm(): Promise<void> {
    const meta = this.requireMeta();
    const deadlines: number[] = [];
    if (meta.status === "active") deadlines.push(meta.lastActivityAt + edgeConfig(this.env).programIdleTtlMs);
    const oldest = this.store.oldestInFlightStart();
    if (oldest !== undefined) deadlines.push(oldest + CALL_LEASE_MS);
    if (meta.summaryPending || this.store.unrecordedCalls().length > 0) deadlines.push(Date.now() + D1_RETRY_MS);
    const next = deadlines.length > 0 ? Math.min(...deadlines) : null;
    if (next === this.alarmAt) return;
    if (next === null) await this.ctx.storage.deleteAlarm();
    else await this.ctx.storage.setAlarm(next);
    this.alarmAt = next;
  }

  private snapshot(meta: ProgramMeta): ProgramState {
    return {
      id: meta.programId,
      tenantId: meta.tenantId,
      status: meta.status,
      createdAt: meta.createdAt,
      endedAt: meta.endedAt,
      lastActivityAt: meta.lastActivityAt,
      serviceMs: meta.serviceMs,
      pathMs: meta.pathMs,
      waitMs: meta.waitMs,
      engine: meta.engine,
      inFlight: this.store.inFlightCount(),
      totals: {
        calls: meta.calls,
        promptTokens: meta.promptTokens,
        cachedTokens: meta.cachedTokens,
        completionTokens: meta.completionTokens,
      },
      threads: this.store.threads(),
    };
  }

  private requireMeta(): ProgramMeta {
    if (!this.meta) throw new Error("ProgramSession: program not created");
    return this.meta;
  }
}

function serviceOf(meta: ProgramMeta): ProgramService {
  return { attainedServiceMs: meta.serviceMs, criticalPathMs: meta.pathMs };
}

function summaryOf(meta: ProgramMeta): Program {
  return {
    id: meta.programId,
    tenantId: meta.tenantId,
    status: meta.status,
    createdAt: meta.createdAt,
    endedAt: meta.endedAt,
    calls: meta.calls,
    promptTokens: meta.promptTokens,
    cachedTokens: meta.cachedTokens,
    completionTokens: meta.completionTokens,
    serviceMs: meta.serviceMs,
    pathMs: meta.pathMs,
    waitMs: meta.waitMs,
  };
}
