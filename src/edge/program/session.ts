import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { FIRST_CONTEXT, nextThreadContext, reopenedContext } from "../../core/recognition/context-generation.js";
import { mergedBranches } from "../../core/recognition/branch-merge.js";
import { callStartValue, completeCall, type ProgramService } from "../../core/service.js";
import { DEFAULT_THREAD } from "../../protocol/headers.js";
import { type Database, database } from "../db/client.js";
import { D1_BATCH_MAX, type LedgerWrite, recordUsage, writeProgramSummary } from "../db/ledger.js";
import type { Program } from "../db/schema.js";
import { AlarmSchedule } from "../durable/alarm-schedule.js";
import { edgeConfig, type Env } from "../env.js";
import { countedObjectD1, countHandOff } from "../instrument/io-counts.js";
import { programLedger } from "../ledger/access.js";
import { ledgerShardOf } from "../ledger/shards.js";
import { ledgerFlushAt, programHandOffWaitMs } from "../ledger/flush-schedule.js";
import { HAND_OFF_MAX_ROWS, type LedgerUsageRow } from "../ledger/types.js";
import { admittedOnAnyShard, tenantLimiter } from "../limiter/access.js";
import { type CallRecord, type ProgramMeta, ProgramStore } from "./store.js";
import { sendProgramEndedHints } from "./end-hints.js";
import { ResponseStore } from "./response-store.js";
import { TOOL_EVENTS_PER_MINUTE, ToolStore } from "./tool-store.js";
import {
  AbandonCallInput,
  type AbandonCallResult,
  type BeginCallResult,
  BeginCallInput,
  CreateProgramInput,
  EndProgramInput,
  type EndProgramResult,
  EndThreadInput,
  type EndThreadResult,
  type ProgramState,
  RecordResponseInput,
  type RecordResponseResult,
  RecordToolEventsInput,
  type RecordToolEventsResult,
  type ResponseConversationResult,
  type SettleCallResult,
  SettleCallInput,
} from "./types.js";

/**
 * A call begun but never settled is reaped as an error this long after the
 * edge's own call deadline (CALL_TIMEOUT_MS), by which every live edge has
 * settled it: only a vanished edge leaves a call to the reaper.
 */
export const CALL_REAP_GRACE_MS = 5 * 60_000;
/** Delay before the alarm retries a D1 write that failed (or pushes a new program's row its first call has not). */
export const D1_RETRY_MS = 30_000;

/** A begin refused inside its transaction: thrown so the transaction (and a program it created) rolls back. */
class BeginRefused extends Error {
  constructor(readonly result: Extract<BeginCallResult, { ok: false }>) {
    super(result.error);
  }
}

type Outcome = Omit<SettleCallInput, "callId">;

/**
 * One agent program: its PLAS/ATLAS service values, threads, in-flight calls,
 * totals and engine affinity, in the object's own SQLite storage. Named
 * `${tenantId}:${programId}`, so another tenant's program ID reaches an empty
 * object and is answered exactly like an unknown one.
 *
 * Every state change is one synchronous SQLite transaction. The ledger's writes
 * (the program summary, one usage row per call) follow it: kept here, pending, and
 * handed to the tenant's UsageLedger together by the alarm, half of LEDGER_FLUSH_MS
 * after the oldest one's settle (at once when the program ends, or at each settle
 * with LEDGER_FLUSH_MS 0); the ledger batches the tenant's rows to D1. An outbox:
 * a row stays here until the ledger acknowledged it durably, and the alarm retries
 * a failed hand-off. With EDGE_BASELINE_PROGRAM_LEDGER the program
 * batches its own rows to D1 instead (the path before, for bench:edge --ledger).
 * The single alarm also reaps leaked calls and expires the program after
 * PROGRAM_IDLE_TTL_MS without activity.
 */
export class ProgramSession extends DurableObject<Env> {
  private readonly store: ProgramStore;
  private readonly tools: ToolStore;
  private readonly responses: ResponseStore;
  private readonly db: Database;
  /** The program row; undefined until create() ran in this object. */
  private meta: ProgramMeta | undefined;
  private readonly alarms: AlarmSchedule;
  /** Hand-offs (or D1 batches) that failed in a row, and when the last did: the retry backoff. */
  private ledgerFailures = { count: 0, lastAt: 0 };

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new ProgramStore(ctx.storage.sql);
    this.tools = new ToolStore(ctx.storage.sql);
    this.responses = new ResponseStore(ctx.storage.sql);
    this.db = database(countedObjectD1(env, "ledger"));
    this.alarms = new AlarmSchedule(ctx.storage);
    void ctx.blockConcurrencyWhile(async () => {
      if (this.store.exists()) this.store.upgrade();
      this.meta = this.store.readMeta();
      if (this.meta) await this.alarms.load();
    });
  }

  /**
   * Starts the program on its own (POST /v1/programs); idempotent. The first
   * call resolves once D1 holds the program row. A chat call that starts a
   * program uses beginCall's `newProgram` instead.
   */
  async create(raw: CreateProgramInput): Promise<ProgramState> {
    const input = CreateProgramInput.parse(raw);
    if (!this.meta) {
      const meta = newProgramMeta(input);
      this.ctx.storage.transactionSync(() => this.store.initialise(meta, DEFAULT_THREAD));
      this.meta = meta;
      try {
        await this.writeSummary();
      } finally {
        await this.scheduleAlarm();
      }
    }
    return this.snapshot(this.meta);
  }

  /**
   * Records a call in flight and answers the program's values to forward.
   * With `newProgram`, an object that holds no program yet creates it in the
   * same transaction (one round trip for a new program's first call; a
   * refused call creates nothing). Its D1 row is not written here: the first
   * settle sends it in one batch before the call's usage row, and the alarm
   * pushes it within D1_RETRY_MS if no settle does.
   */
  async beginCall(raw: BeginCallInput): Promise<BeginCallResult> {
    const parsed = BeginCallInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input", detail: z.prettifyError(parsed.error) };
    const input = parsed.data;
    const creating = !this.meta && input.newProgram !== undefined;
    const meta = this.meta ?? (input.newProgram ? newProgramMeta({ ...input.newProgram, now: input.now }) : undefined);
    if (!meta) return { ok: false, error: "not_found" };
    if (meta.status !== "active") return { ok: false, error: meta.status };
    const next: ProgramMeta = { ...meta, lastActivityAt: Math.max(meta.lastActivityAt, input.now), ...ledgerShardsFrom(meta, input.ledgerShards) };
    let result: BeginCallResult;
    try {
      result = this.ctx.storage.transactionSync(() => {
        if (creating) this.store.initialise(meta, DEFAULT_THREAD);
        return this.startCall(input, meta, next);
      });
    } catch (error) {
      if (error instanceof BeginRefused) return error.result;
      throw error;
    }
    this.meta = next;
    await this.scheduleAlarm();
    return result;
  }

  // ------------------------------------------------ begin undone (call admission in parallel)

  /**
   * Takes back a begun call its tenant's limiter refused: the edge begins a call in
   * parallel with its admission (one round trip instead of two) and undoes the begin on
   * a refusal. A program with nothing else in it (the one the refused call would have
   * started) is dropped entirely, so a refused call still leaves no program behind.
   */
  async abandonCall(raw: AbandonCallInput): Promise<AbandonCallResult> {
    const parsed = AbandonCallInput.safeParse(raw);
    if (!parsed.success) return { abandoned: false, reason: "invalid_input" };
    const meta = this.meta;
    if (!meta) return { abandoned: false, reason: "not_found" };
    const call = this.store.call(parsed.data.callId);
    if (!call) return { abandoned: false, reason: "unknown_call" };
    if (call.status !== "in_flight") return { abandoned: false, reason: "not_in_flight" };
    this.store.removeInFlightCall(call.callId);
    const empty = parsed.data.createdByCall && meta.calls === 0 && this.store.callCount() === 0 && meta.status === "active";
    if (!empty) {
      await this.scheduleAlarm();
      return { abandoned: true, programDropped: false };
    }
    // Never used: its D1 row was not written yet (that waits for a settle or the alarm), so nothing outside this object knows it.
    await this.alarms.clear();
    await this.ctx.storage.deleteAll();
    this.meta = undefined;
    return { abandoned: true, programDropped: true };
  }

  /** The call's part of beginCall, inside its transaction; a refusal throws BeginRefused to roll it back. */
  private startCall(
    input: z.output<typeof BeginCallInput>,
    meta: ProgramMeta,
    next: ProgramMeta,
  ): Extract<BeginCallResult, { ok: true }> {
    const refuse = (error: "duplicate_call" | "unknown_parent" | "parent_mismatch") =>
      new BeginRefused({ ok: false, error });
    if (this.store.call(input.callId)) throw refuse("duplicate_call");
    const existing = this.store.thread(input.thread);
    const parent = input.parentThread === undefined ? undefined : this.store.thread(input.parentThread);
    if (input.parentThread !== undefined) {
      if (!parent) throw refuse("unknown_parent");
      if (existing && existing.parent !== input.parentThread) throw refuse("parent_mismatch");
    }
    if (!existing) this.store.addThread(input.thread, input.parentThread ?? null, input.now);
    // A call on a thread the agent ended reopens it, at a new generation: the old context's KV was dropped.
    const reopening = existing?.ended === true;
    if (reopening) this.store.reopenThread(input.thread);
    // A new fork starts at its parent's context: what it sends is compared with the parent's last call.
    const previous = existing === undefined ? (parent?.context ?? FIRST_CONTEXT) : reopening ? reopenedContext(existing.context) : existing.context;
    const context = nextThreadContext(previous, input.contextHashes);
    // A new thread has no forks yet; an existing one's call may take a fork's work back in.
    const merged = existing === undefined ? [] : mergedBranches(previous, this.store.openForks(input.thread), input.contextHashes);
    if (input.contextHashes.length > 0 || reopening) this.store.writeThreadContext(input.thread, context);
    // The agent calls the model again once the thread's tools returned.
    this.tools.endThreadRuns(input.thread);
    const startValueMs = callStartValue(serviceOf(meta));
    this.store.addCall({
      callId: input.callId,
      thread: input.thread,
      model: input.model,
      startValueMs,
      startedAt: input.now,
      pool: input.pool,
      api: input.api,
    });
    this.store.writeMeta(next);
    return {
      ok: true,
      serviceMs: meta.serviceMs,
      pathMs: meta.pathMs,
      waitMs: meta.waitMs,
      engine: meta.engine,
      pool: meta.pool,
      startValueMs,
      contextGeneration: context.generation,
      mergedBranches: merged.map((fork) => ({ thread: fork.name, messages: fork.context.messages, hash: fork.context.hash })),
    };
  }

  /**
   * Settles what a call used: service values, totals, affinity, and its usage
   * row, kept in this object's storage in the same transaction; the row waits there
   * for the alarm's hand-off with the program's other calls' (flushLedgerAtSettle).
   * Idempotent on the call ID: a repeat changes nothing.
   */
  async settleCall(raw: SettleCallInput): Promise<SettleCallResult> {
    const parsed = SettleCallInput.safeParse(raw);
    if (!parsed.success) return { settled: false, reason: "invalid_input", detail: z.prettifyError(parsed.error) };
    const { callId, ...outcome } = parsed.data;
    if (!this.meta) return { settled: false, reason: "not_found" };
    const call = this.store.call(callId);
    if (!call) return { settled: false, reason: "unknown_call" };
    if (call.status !== "in_flight") {
      if (!call.recorded) await this.flushLedgerAtSettle();
      return { settled: false, reason: "already_settled" };
    }
    this.applySettle(call, outcome, { activity: true });
    await this.flushLedgerAtSettle();
    await this.scheduleAlarm();
    return { settled: true };
  }

  /**
   * Records tool events (POST /v1/programs/{id}/events): bounded tool state, and the
   * program's activity (a program running a long tool is not idle). All or nothing:
   * a batch the program's event bucket cannot take is refused whole.
   */
  async recordToolEvents(raw: RecordToolEventsInput): Promise<RecordToolEventsResult> {
    const parsed = RecordToolEventsInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input", detail: z.prettifyError(parsed.error) };
    const { events, now } = parsed.data;
    const meta = this.meta;
    if (!meta) return { ok: false, error: "not_found" };
    if (meta.status !== "active") return { ok: false, error: meta.status };
    const next: ProgramMeta = { ...meta, lastActivityAt: Math.max(meta.lastActivityAt, now) };
    const taken = this.ctx.storage.transactionSync(() => {
      const bucket = this.tools.take(events.length, now);
      if (!bucket.ok) return bucket;
      for (const event of events) this.tools.apply(event, now);
      this.store.writeMeta(next);
      return bucket;
    });
    if (!taken.ok) return { ok: false, error: "rate_limited", retryAfterMs: taken.retryAfterMs, limitPerMinute: TOOL_EVENTS_PER_MINUTE };
    this.meta = next;
    await this.scheduleAlarm();
    return { ok: true, accepted: events.length, tools: this.tools.state(), pool: next.pool };
  }

  /** Keeps a Responses API response's conversation for a later previous_response_id (ended programs keep none). */
  async recordResponse(raw: RecordResponseInput): Promise<RecordResponseResult> {
    const parsed = RecordResponseInput.safeParse(raw);
    if (!parsed.success) return { recorded: false, reason: "invalid_input" };
    if (this.meta?.status !== "active") return { recorded: false, reason: "not_found" };
    const { responseId, parentId, items, now } = parsed.data;
    return this.responses.record(responseId, parentId, items, now) ? { recorded: true } : { recorded: false, reason: "too_large" };
  }

  /** The conversation a stored response ends: its chain's items, first to last. */
  async responseConversation(responseId: string): Promise<ResponseConversationResult> {
    if (this.meta?.status !== "active") return { ok: false, error: "not_found" };
    const itemsJson = this.responses.conversationJson(responseId);
    return itemsJson === undefined ? { ok: false, error: "not_found" } : { ok: true, itemsJson };
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
    let servedBy: string[] = [];
    if (this.meta.status === "active") {
      servedBy = this.servedPools();
      this.finish("ended", input.now);
      await this.recordPending();
      await this.releaseProgramSlot();
      await this.scheduleAlarm();
    }
    return { ok: true, state: this.snapshot(this.meta), servedBy };
  }

  /**
   * Ends one thread, as the agent says (DELETE /v1/programs/{id}/threads/{thread}): it
   * is marked ended with its outcome, its tool runs end, and the answer names the pools
   * that hold its context so the caller can tell them. Idempotent: a thread already
   * ended keeps its first end and names no pools. A later call on it reopens it (beginCall).
   */
  async endThread(raw: EndThreadInput): Promise<EndThreadResult> {
    const parsed = EndThreadInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input" };
    const { thread: name, outcome, ifUnchanged, now } = parsed.data;
    const meta = this.meta;
    if (!meta) return { ok: false, error: "not_found" };
    if (meta.status !== "active") return { ok: false, error: meta.status };
    const thread = this.store.thread(name);
    if (!thread) return { ok: false, error: "unknown_thread" };
    const moved = ifUnchanged !== undefined && (thread.context.messages !== ifUnchanged.messages || thread.context.hash !== ifUnchanged.hash);
    if (!thread.ended && ifUnchanged !== undefined && (moved || this.store.threadInFlight(name) > 0)) return { ok: false, error: "thread_changed" };
    let servedBy: string[] = [];
    if (!thread.ended) {
      servedBy = this.store.threadPools(name);
      const next: ProgramMeta = { ...meta, lastActivityAt: Math.max(meta.lastActivityAt, now) };
      this.ctx.storage.transactionSync(() => {
        this.store.endThread(name, outcome, now);
        this.tools.endThreadRuns(name);
        this.store.writeMeta(next);
      });
      this.meta = next;
      await this.scheduleAlarm();
    }
    const state = this.store.threads().find((t) => t.name === name);
    if (!state) throw new Error(`ProgramSession: thread ${name} vanished while ending`);
    return { ok: true, tenantId: meta.tenantId, thread: state, servedBy, generation: thread.context.generation };
  }

  override async alarm(): Promise<void> {
    this.alarms.forget();
    const meta = this.meta;
    if (!meta) return;
    const now = Date.now();
    for (const call of this.store.inFlightStartedBy(now - this.reapAfterMs())) {
      if (await this.beganWithoutAdmission(meta.tenantId, call.callId)) {
        this.store.removeInFlightCall(call.callId);
        continue;
      }
      const reaped: Outcome = {
        status: "error",
        promptTokens: 0,
        cachedTokens: 0,
        completionTokens: 0,
        usageSource: "lost",
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
    const servedBy = expiring ? this.servedPools() : [];
    if (expiring) this.finish("expired", now);
    await this.recordPending();
    if (expiring) await this.releaseProgramSlot();
    await this.scheduleAlarm();
    // Its pools may evict its KV first; a hint, so after everything that must happen.
    if (expiring) {
      const ended = { tenantId: current.tenantId, programId: current.programId, reason: "expired" as const, pools: servedBy };
      await sendProgramEndedHints(this.env, ended, (work) => this.ctx.waitUntil(work));
    }
  }

  /** The pools that served the program: its calls' (kept until it ends) and its current one. */
  private servedPools(): string[] {
    const pools = new Set(this.store.servedPools());
    const current = this.requireMeta().pool;
    if (current !== "") pools.add(current);
    return [...pools];
  }

  /**
   * A call begun alongside an admission that refused it, whose take-back (abandonCall)
   * was lost: its limiter never leased it, so it is no call at all and leaves no ledger
   * row. The limiter keeps every lease, closed ones included, longer than any call waits
   * for the reaper. Unsure (the limiter did not answer): reaped as lost, as before.
   */
  private async beganWithoutAdmission(tenantId: string, callId: string): Promise<boolean> {
    try {
      return !(await admittedOnAnyShard(this.env, tenantId, callId));
    } catch (error) {
      console.error(`ProgramSession: asking the limiter about ${callId} failed; reaping it as lost`, error);
      return false;
    }
  }

  /**
   * At a settle: with LEDGER_FLUSH_MS 0 the row goes to the tenant's ledger now (which
   * writes it to D1 before it answers). Otherwise it waits for the alarm's hand-off
   * (scheduleAlarm), so the program's calls within the window cost the ledger one
   * hand-off, not one each; a late settle of an ended program is handed off at once (its
   * summary is final). The baseline batches here and writes at a settle only with
   * LEDGER_FLUSH_MS 0, as before.
   */
  private async flushLedgerAtSettle(): Promise<void> {
    const config = edgeConfig(this.env);
    if (config.ledgerFlushMs !== 0 && (config.baselineProgramLedger || this.requireMeta().status === "active")) return;
    await this.recordPending();
  }

  /** How long after its settle a row waits here: the baseline's whole window, or the first half of the tenant ledger's. */
  private pendingWaitMs(): number {
    const config = edgeConfig(this.env);
    return config.baselineProgramLedger ? config.ledgerFlushMs : programHandOffWaitMs(config.ledgerFlushMs);
  }

  /** Sends what the ledger lacks (the summary if changed, settled rows not yet acknowledged) to where it goes. */
  private async recordPending(): Promise<void> {
    if (edgeConfig(this.env).baselineProgramLedger) await this.flushToD1();
    else await this.handOffToLedger();
  }

  /**
   * Hands pending rows (and the changed summary) to the tenant's ledger, HAND_OFF_MAX_ROWS
   * at a time. A row is marked recorded only once the ledger answered that it stored it, so
   * a hand-off lost on the way is sent again (the ledger keys rows by call ID, and D1
   * ignores a call ID it has: never twice). A failure is logged and left for the alarm to
   * retry with backoff (ledger/flush-schedule.ts).
   */
  private async handOffToLedger(): Promise<void> {
    try {
      const meta = this.requireMeta();
      const summary = meta.summaryPending ? summaryOf(meta) : undefined;
      const rows = this.store.unrecordedCalls().flatMap((call) => usageRowOf(meta, call) ?? []);
      if (!summary && rows.length === 0) return;
      const { stub: ledger, shard } = programLedger(this.env, meta.tenantId, meta.programId, meta.ledgerShards);
      for (let i = 0; i === 0 || i < rows.length; i += HAND_OFF_MAX_ROWS) {
        const part = rows.slice(i, i + HAND_OFF_MAX_ROWS);
        const sendsSummary = i === 0 && summary !== undefined;
        countHandOff(this.env);
        const result = await ledger.handOff({ programs: sendsSummary ? [summary] : [], rows: part, shard, shards: meta.ledgerShards });
        if (!result.ok) throw new Error(`the ledger refused the hand-off (${result.error}): ${result.detail}`);
        this.ctx.storage.transactionSync(() => {
          for (const row of part) this.store.markRecorded(row.callId);
          if (sendsSummary) this.summaryWritten(summary);
        });
      }
      if (this.requireMeta().status !== "active") this.ctx.storage.transactionSync(() => this.store.cleanUp());
      this.ledgerFailures = { count: 0, lastAt: 0 };
    } catch (error) {
      this.ledgerFailures = { count: this.ledgerFailures.count + 1, lastAt: Date.now() };
      console.error("ProgramSession: handing usage to the tenant's ledger failed, will retry", error);
    }
  }

  /** How long after its start an unsettled call is reaped. */
  private reapAfterMs(): number {
    return edgeConfig(this.env).callTimeoutMs + CALL_REAP_GRACE_MS;
  }

  private applySettle(call: CallRecord, outcome: Outcome, options: { activity: boolean }): void {
    const meta = this.requireMeta();
    const service = completeCall(serviceOf(meta), call.startValueMs, outcome.serviceMs);
    const pool = outcome.pool ?? call.pool;
    // An engine that served the call pins the program to its pool; engine IDs are a
    // pool's own, so on another pool the old engine means nothing.
    const served = outcome.engine !== "";
    const next: ProgramMeta = {
      ...meta,
      serviceMs: service.attainedServiceMs,
      pathMs: service.criticalPathMs,
      waitMs: meta.waitMs + outcome.queueMs,
      engine: served ? outcome.engine : meta.engine,
      pool: served ? pool : meta.pool,
      calls: meta.calls + 1,
      promptTokens: meta.promptTokens + outcome.promptTokens,
      cachedTokens: meta.cachedTokens + outcome.cachedTokens,
      completionTokens: meta.completionTokens + outcome.completionTokens,
      lastActivityAt: options.activity ? Math.max(meta.lastActivityAt, outcome.finishedAt) : meta.lastActivityAt,
      // Once ended, D1's summary is final and must follow late settles.
      summaryPending: meta.summaryPending || meta.status !== "active",
    };
    this.ctx.storage.transactionSync(() => {
      this.store.finishCall(call.callId, { ...outcome, pool });
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
      this.tools.clearRuns();
      this.responses.clear();
    });
    this.meta = next;
  }

  /**
   * The baseline (EDGE_BASELINE_PROGRAM_LEDGER): pushes pending D1 writes in one batch (one round trip, one transaction, in
   * order): the program row first (usage rows reference it), then the usage
   * rows. Rows are marked recorded only once D1 answered, so an eviction between
   * the two resends them (ON CONFLICT DO NOTHING on the call ID: never twice). A
   * failure is logged and left for the alarm to retry with backoff.
   */
  private async flushToD1(): Promise<void> {
    try {
      const meta = this.requireMeta();
      const summary = meta.summaryPending ? summaryOf(meta) : undefined;
      const rows = this.store.unrecordedCalls().flatMap((call) => usageRowOf(meta, call) ?? []);
      const writes: LedgerWrite[] = [
        ...(summary ? [writeProgramSummary(this.db, summary)] : []),
        ...rows.map((row) => recordUsage(this.db, row)),
      ];
      if (writes.length === 0) return;
      for (let i = 0; i < writes.length; i += D1_BATCH_MAX) {
        const [first, ...rest] = writes.slice(i, i + D1_BATCH_MAX);
        if (first) await this.db.batch([first, ...rest]);
      }
      this.ctx.storage.transactionSync(() => {
        for (const row of rows) this.store.markRecorded(row.callId);
        if (summary) this.summaryWritten(summary);
        if (this.requireMeta().status !== "active") this.store.cleanUp();
      });
      this.ledgerFailures = { count: 0, lastAt: 0 };
    } catch (error) {
      this.ledgerFailures = { count: this.ledgerFailures.count + 1, lastAt: Date.now() };
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

  /** Writes the program row now (create() answers only once D1 holds it); throws if D1 fails. */
  private async writeSummary(): Promise<void> {
    const summary = summaryOf(this.requireMeta());
    await writeProgramSummary(this.db, summary);
    this.summaryWritten(summary);
  }

  /** D1 holds `summary`; a settle during the write may have changed the figures, and then it stays pending. */
  private summaryWritten(summary: Program): void {
    const now = this.requireMeta();
    if (JSON.stringify(summaryOf(now)) !== JSON.stringify(summary)) return;
    const next = { ...now, summaryPending: false };
    this.store.writeMeta(next);
    this.meta = next;
  }

  /**
   * One alarm for everything: idle expiry, the oldest lease, the next hand-off to
   * the tenant's ledger (the baseline: the next D1 batch; ledger/flush-schedule.ts),
   * or a retry.
   * It is only moved earlier (or deleted once nothing is left): every call
   * pushes the idle deadline later, and rewriting the alarm for that would
   * cost a storage write per begin and per settle. An alarm that fires early
   * finds nothing due and re-plans.
   */
  private async scheduleAlarm(): Promise<void> {
    const meta = this.requireMeta();
    const deadlines: number[] = [];
    if (meta.status === "active") deadlines.push(meta.lastActivityAt + edgeConfig(this.env).programIdleTtlMs);
    const oldest = this.store.oldestInFlightStart();
    if (oldest !== undefined) deadlines.push(oldest + this.reapAfterMs());
    const oldestPendingAt = this.store.oldestUnrecordedFinish();
    if (oldestPendingAt !== undefined) {
      const { count, lastAt } = this.ledgerFailures;
      deadlines.push(
        ledgerFlushAt({ oldestPendingAt, flushMs: this.pendingWaitMs(), failures: count, lastFailureAt: lastAt }),
      );
    } else if (meta.summaryPending) {
      deadlines.push(Date.now() + D1_RETRY_MS);
    }
    await this.alarms.moveTo(deadlines.length > 0 ? Math.min(...deadlines) : null);
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
      pool: meta.pool,
      inFlight: this.store.inFlightCount(),
      totals: {
        calls: meta.calls,
        promptTokens: meta.promptTokens,
        cachedTokens: meta.cachedTokens,
        completionTokens: meta.completionTokens,
      },
      threads: this.store.threads(),
      tools: this.tools.state(),
    };
  }

  private requireMeta(): ProgramMeta {
    if (!this.meta) throw new Error("ProgramSession: program not created");
    return this.meta;
  }
}

function newProgramMeta(input: CreateProgramInput): ProgramMeta {
  return {
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
    pool: "",
    calls: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
    // D1 has no row for it yet.
    summaryPending: true,
    ledgerShards: 1,
  };
}

/**
 * The tenant's ledger shards from a begin (absent: unchanged). When they move the program to
 * another ledger shard, its summary goes with its next hand-off (ledger/shards.ts): the new
 * shard then holds the program row before the usage rows that reference it.
 */
function ledgerShardsFrom(meta: ProgramMeta, shards: number | undefined): Pick<ProgramMeta, "ledgerShards" | "summaryPending"> {
  if (shards === undefined || shards === meta.ledgerShards) return { ledgerShards: meta.ledgerShards, summaryPending: meta.summaryPending };
  const moved = ledgerShardOf(meta.programId, shards) !== ledgerShardOf(meta.programId, meta.ledgerShards);
  return { ledgerShards: shards, summaryPending: meta.summaryPending || moved };
}

/** A settled call's usage row; undefined while it is in flight. */
function usageRowOf(meta: ProgramMeta, call: CallRecord): LedgerUsageRow | undefined {
  if (call.status === "in_flight" || call.finishedAt === null) return undefined;
  return {
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
    usageSource: call.usageSource,
    api: call.api,
  };
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
