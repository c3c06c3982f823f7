import type { CallApi, CallStatus, UsageSource } from "../db/schema.js";
import { RESPONSE_SCHEMA } from "./response-store.js";
import { TOOL_SCHEMA } from "./tool-store.js";
import type { OpenBranch } from "../../core/recognition/branch-merge.js";
import type { ThreadContext } from "../../core/recognition/context-generation.js";
import type { ThreadEndOutcome } from "../../protocol/threads.js";
import type { ProgramStatus, ThreadState } from "./types.js";

/*
 * A ProgramSession's own SQLite tables (ctx.storage.sql), behind typed methods.
 * The tables are created by the program's first create(), not in the
 * constructor, so probing an unknown or foreign program ID leaves no storage
 * behind. Schema changes: add columns with ALTER TABLE guarded by a check of
 * pragma table_info, never rebuild (objects hold live programs).
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS program (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  tenant_id TEXT NOT NULL,
  program_id TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  ended_at INTEGER,
  last_activity_at INTEGER NOT NULL,
  service_ms REAL NOT NULL,
  path_ms REAL NOT NULL,
  wait_ms REAL NOT NULL,
  engine TEXT NOT NULL,
  pool TEXT NOT NULL DEFAULT '',
  calls INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  cached_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
  summary_pending INTEGER NOT NULL,
  ledger_shards INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS threads (
  name TEXT PRIMARY KEY,
  parent TEXT,
  created_at INTEGER NOT NULL,
  calls INTEGER NOT NULL DEFAULT 0,
  service_ms REAL NOT NULL DEFAULT 0,
  context_generation INTEGER NOT NULL DEFAULT 0,
  context_messages INTEGER NOT NULL DEFAULT 0,
  context_hash TEXT NOT NULL DEFAULT '',
  ended_at INTEGER,
  end_outcome TEXT
);
CREATE TABLE IF NOT EXISTS calls (
  call_id TEXT PRIMARY KEY,
  thread TEXT NOT NULL,
  model TEXT NOT NULL,
  start_value_ms REAL NOT NULL,
  started_at INTEGER NOT NULL,
  status TEXT NOT NULL,
  engine TEXT NOT NULL DEFAULT '',
  prompt_tokens INTEGER NOT NULL DEFAULT 0,
  cached_tokens INTEGER NOT NULL DEFAULT 0,
  completion_tokens INTEGER NOT NULL DEFAULT 0,
  service_ms REAL NOT NULL DEFAULT 0,
  queue_ms REAL NOT NULL DEFAULT 0,
  finished_at INTEGER,
  recorded INTEGER NOT NULL DEFAULT 0,
  pool TEXT NOT NULL DEFAULT '',
  usage_source TEXT NOT NULL DEFAULT 'engine',
  api TEXT NOT NULL DEFAULT 'chat.completions'
);
CREATE INDEX IF NOT EXISTS calls_status_idx ON calls (status, started_at);
${TOOL_SCHEMA}
${RESPONSE_SCHEMA}`;

/** The program row, in memory. */
export interface ProgramMeta {
  tenantId: string;
  programId: string;
  status: ProgramStatus;
  createdAt: number;
  endedAt: number | null;
  lastActivityAt: number;
  serviceMs: number;
  pathMs: number;
  waitMs: number;
  engine: string;
  /** The pool whose engine served the program last (its KV cache is there); empty when none has. */
  pool: string;
  calls: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** D1's program row does not yet reflect these figures. */
  summaryPending: boolean;
  /** The tenant's ledger shards as of the program's last begin (ledger/shards.ts): where its hand-offs go. */
  ledgerShards: number;
}

export type CallRowStatus = "in_flight" | CallStatus;

export interface CallRecord {
  callId: string;
  thread: string;
  model: string;
  startValueMs: number;
  startedAt: number;
  status: CallRowStatus;
  engine: string;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  serviceMs: number;
  queueMs: number;
  finishedAt: number | null;
  recorded: boolean;
  pool: string;
  usageSource: UsageSource;
  api: CallApi;
}

export interface ThreadRecord {
  name: string;
  parent: string | null;
  /** What the thread's previous call sent (core/recognition/context-generation.ts). */
  context: ThreadContext;
  /** The agent ended the thread (DELETE …/threads/{thread}) and no call has reopened it. */
  ended: boolean;
}

type ProgramRow = {
  tenant_id: string;
  program_id: string;
  status: string;
  created_at: number;
  ended_at: number | null;
  last_activity_at: number;
  service_ms: number;
  path_ms: number;
  wait_ms: number;
  engine: string;
  pool: string;
  calls: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  summary_pending: number;
  ledger_shards: number;
};

type CallRow = {
  call_id: string;
  thread: string;
  model: string;
  start_value_ms: number;
  started_at: number;
  status: string;
  engine: string;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  service_ms: number;
  queue_ms: number;
  finished_at: number | null;
  recorded: number;
  pool: string;
  usage_source: string;
  api: string;
};

const toCall = (row: CallRow): CallRecord => ({
  callId: row.call_id,
  thread: row.thread,
  model: row.model,
  startValueMs: row.start_value_ms,
  startedAt: row.started_at,
  status: row.status as CallRowStatus,
  engine: row.engine,
  promptTokens: row.prompt_tokens,
  cachedTokens: row.cached_tokens,
  completionTokens: row.completion_tokens,
  serviceMs: row.service_ms,
  queueMs: row.queue_ms,
  finishedAt: row.finished_at,
  recorded: row.recorded === 1,
  pool: row.pool,
  usageSource: row.usage_source as UsageSource,
  api: row.api as CallApi,
});

export class ProgramStore {
  constructor(private readonly sql: SqlStorage) {}

  /** Whether create() ever ran in this object. */
  exists(): boolean {
    return this.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'program'").toArray().length > 0;
  }

  /** Brings an object created by an older version up to SCHEMA (added columns only). */
  upgrade(): void {
    const columns = this.sql
      .exec<{ name: string }>("SELECT name FROM pragma_table_info('calls')")
      .toArray()
      .map((row) => row.name);
    if (columns.length > 0 && !columns.includes("pool")) {
      this.sql.exec("ALTER TABLE calls ADD COLUMN pool TEXT NOT NULL DEFAULT ''");
    }
    if (columns.length > 0 && !columns.includes("usage_source")) {
      this.sql.exec("ALTER TABLE calls ADD COLUMN usage_source TEXT NOT NULL DEFAULT 'engine'");
    }
    if (columns.length > 0 && !columns.includes("api")) {
      this.sql.exec("ALTER TABLE calls ADD COLUMN api TEXT NOT NULL DEFAULT 'chat.completions'");
    }
    const programColumns = this.sql
      .exec<{ name: string }>("SELECT name FROM pragma_table_info('program')")
      .toArray()
      .map((row) => row.name);
    if (programColumns.length > 0 && !programColumns.includes("pool")) {
      this.sql.exec("ALTER TABLE program ADD COLUMN pool TEXT NOT NULL DEFAULT ''");
    }
    if (programColumns.length > 0 && !programColumns.includes("ledger_shards")) {
      this.sql.exec("ALTER TABLE program ADD COLUMN ledger_shards INTEGER NOT NULL DEFAULT 1");
    }
    const threadColumns = this.sql
      .exec<{ name: string }>("SELECT name FROM pragma_table_info('threads')")
      .toArray()
      .map((row) => row.name);
    if (threadColumns.length > 0 && !threadColumns.includes("context_generation")) {
      this.sql.exec("ALTER TABLE threads ADD COLUMN context_generation INTEGER NOT NULL DEFAULT 0");
      this.sql.exec("ALTER TABLE threads ADD COLUMN context_messages INTEGER NOT NULL DEFAULT 0");
      this.sql.exec("ALTER TABLE threads ADD COLUMN context_hash TEXT NOT NULL DEFAULT ''");
    }
    if (threadColumns.length > 0 && !threadColumns.includes("ended_at")) {
      this.sql.exec("ALTER TABLE threads ADD COLUMN ended_at INTEGER");
      this.sql.exec("ALTER TABLE threads ADD COLUMN end_outcome TEXT");
    }
    // Tool state came later: its tables are new, so creating them is the whole upgrade.
    this.sql.exec(TOOL_SCHEMA);
    this.sql.exec(RESPONSE_SCHEMA);
  }

  initialise(meta: ProgramMeta, mainThread: string): void {
    this.sql.exec(SCHEMA);
    this.writeMeta(meta);
    this.sql.exec("INSERT OR IGNORE INTO threads (name, parent, created_at) VALUES (?, NULL, ?)", mainThread, meta.createdAt);
  }

  readMeta(): ProgramMeta | undefined {
    if (!this.exists()) return undefined;
    const row = this.sql.exec<ProgramRow>("SELECT * FROM program WHERE id = 1").toArray()[0];
    if (!row) return undefined;
    return {
      tenantId: row.tenant_id,
      programId: row.program_id,
      status: row.status as ProgramStatus,
      createdAt: row.created_at,
      endedAt: row.ended_at,
      lastActivityAt: row.last_activity_at,
      serviceMs: row.service_ms,
      pathMs: row.path_ms,
      waitMs: row.wait_ms,
      engine: row.engine,
      pool: row.pool,
      calls: row.calls,
      promptTokens: row.prompt_tokens,
      cachedTokens: row.cached_tokens,
      completionTokens: row.completion_tokens,
      summaryPending: row.summary_pending === 1,
      ledgerShards: row.ledger_shards,
    };
  }

  writeMeta(m: ProgramMeta): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO program (id, tenant_id, program_id, status, created_at, ended_at, last_activity_at,
         service_ms, path_ms, wait_ms, engine, pool, calls, prompt_tokens, cached_tokens, completion_tokens, summary_pending, ledger_shards)
       VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      m.tenantId,
      m.programId,
      m.status,
      m.createdAt,
      m.endedAt,
      m.lastActivityAt,
      m.serviceMs,
      m.pathMs,
      m.waitMs,
      m.engine,
      m.pool,
      m.calls,
      m.promptTokens,
      m.cachedTokens,
      m.completionTokens,
      m.summaryPending ? 1 : 0,
      m.ledgerShards,
    );
  }

  thread(name: string): ThreadRecord | undefined {
    const row = this.sql
      .exec<{ name: string; parent: string | null; context_generation: number; context_messages: number; context_hash: string; ended_at: number | null }>(
        "SELECT name, parent, context_generation, context_messages, context_hash, ended_at FROM threads WHERE name = ?",
        name,
      )
      .toArray()[0];
    if (row === undefined) return undefined;
    return {
      name: row.name,
      parent: row.parent,
      context: { generation: row.context_generation, messages: row.context_messages, hash: row.context_hash },
      ended: row.ended_at !== null,
    };
  }

  /** The open (not ended) forks of `parent`, with their contexts and calls in flight. */
  openForks(parent: string): OpenBranch[] {
    return this.sql
      .exec<{ name: string; context_generation: number; context_messages: number; context_hash: string; in_flight: number }>(
        `SELECT t.name, t.context_generation, t.context_messages, t.context_hash,
                (SELECT COUNT(*) FROM calls c WHERE c.thread = t.name AND c.status = 'in_flight') AS in_flight
         FROM threads t WHERE t.parent = ? AND t.ended_at IS NULL`,
        parent,
      )
      .toArray()
      .map((row) => ({
        name: row.name,
        context: { generation: row.context_generation, messages: row.context_messages, hash: row.context_hash },
        inFlight: row.in_flight,
      }));
  }

  /** The thread's calls in flight now. */
  threadInFlight(name: string): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM calls WHERE thread = ? AND status = 'in_flight'", name).one().n;
  }

  /** Marks the thread ended by the agent; a thread already ended keeps its first end. */
  endThread(name: string, outcome: ThreadEndOutcome, now: number): void {
    this.sql.exec("UPDATE threads SET ended_at = ?, end_outcome = ? WHERE name = ? AND ended_at IS NULL", now, outcome, name);
  }

  /** A call on an ended thread: it is open again. */
  reopenThread(name: string): void {
    this.sql.exec("UPDATE threads SET ended_at = NULL, end_outcome = NULL WHERE name = ?", name);
  }

  /** The pools whose engines ran a call of the thread, or run one now (its context is there). */
  threadPools(name: string): string[] {
    return this.sql
      .exec<{ pool: string }>(
        "SELECT DISTINCT pool FROM calls WHERE thread = ? AND pool != '' AND (engine != '' OR status = 'in_flight')",
        name,
      )
      .toArray()
      .map((row) => row.pool);
  }

  addThread(name: string, parent: string | null, now: number): void {
    this.sql.exec("INSERT INTO threads (name, parent, created_at) VALUES (?, ?, ?)", name, parent, now);
  }

  /** The thread's context after its latest call. */
  writeThreadContext(name: string, context: ThreadContext): void {
    this.sql.exec(
      "UPDATE threads SET context_generation = ?, context_messages = ?, context_hash = ? WHERE name = ?",
      context.generation,
      context.messages,
      context.hash,
      name,
    );
  }

  /** Adds a settled call to its thread's figures; a no-op once threads are cleaned up. */
  countThreadCall(name: string, serviceMs: number): void {
    this.sql.exec("UPDATE threads SET calls = calls + 1, service_ms = service_ms + ? WHERE name = ?", serviceMs, name);
  }

  threads(): ThreadState[] {
    return this.sql
      .exec<{
        name: string;
        parent: string | null;
        calls: number;
        service_ms: number;
        in_flight: number;
        context_generation: number;
        ended_at: number | null;
        end_outcome: string | null;
      }>(
        `SELECT t.name, t.parent, t.calls, t.service_ms, t.context_generation, t.ended_at, t.end_outcome,
                (SELECT COUNT(*) FROM calls c WHERE c.thread = t.name AND c.status = 'in_flight') AS in_flight
         FROM threads t ORDER BY t.created_at, t.name`,
      )
      .toArray()
      .map((row) => ({
        name: row.name,
        parent: row.parent,
        inFlight: row.in_flight,
        calls: row.calls,
        serviceMs: row.service_ms,
        contextGeneration: row.context_generation,
        endedAt: row.ended_at,
        endOutcome: row.end_outcome as ThreadEndOutcome | null,
      }));
  }

  call(callId: string): CallRecord | undefined {
    const row = this.sql.exec<CallRow>("SELECT * FROM calls WHERE call_id = ?", callId).toArray()[0];
    return row ? toCall(row) : undefined;
  }

  addCall(call: Pick<CallRecord, "callId" | "thread" | "model" | "startValueMs" | "startedAt" | "pool" | "api">): void {
    this.sql.exec(
      "INSERT INTO calls (call_id, thread, model, start_value_ms, started_at, status, pool, api) VALUES (?, ?, ?, ?, ?, 'in_flight', ?, ?)",
      call.callId,
      call.thread,
      call.model,
      call.startValueMs,
      call.startedAt,
      call.pool,
      call.api,
    );
  }

  finishCall(
    callId: string,
    outcome: Pick<
      CallRecord,
      "engine" | "pool" | "promptTokens" | "cachedTokens" | "completionTokens" | "usageSource" | "serviceMs" | "queueMs"
    > & { status: CallStatus; finishedAt: number },
  ): void {
    this.sql.exec(
      `UPDATE calls SET status = ?, engine = ?, pool = ?, prompt_tokens = ?, cached_tokens = ?, completion_tokens = ?,
         usage_source = ?, service_ms = ?, queue_ms = ?, finished_at = ? WHERE call_id = ? AND status = 'in_flight'`,
      outcome.status,
      outcome.engine,
      outcome.pool,
      outcome.promptTokens,
      outcome.cachedTokens,
      outcome.completionTokens,
      outcome.usageSource,
      outcome.serviceMs,
      outcome.queueMs,
      outcome.finishedAt,
      callId,
    );
  }

  /** Takes back a call that never ran (its admission was refused after its begin). */
  removeInFlightCall(callId: string): void {
    this.sql.exec("DELETE FROM calls WHERE call_id = ? AND status = 'in_flight'", callId);
  }

  /** Every call the program has, whatever its state. */
  callCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM calls").one().n;
  }

  markRecorded(callId: string): void {
    this.sql.exec("UPDATE calls SET recorded = 1 WHERE call_id = ?", callId);
  }

  inFlightCount(): number {
    return this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM calls WHERE status = 'in_flight'").one().n;
  }

  /** In-flight calls that started at or before `startedBy`. */
  inFlightStartedBy(startedBy: number): CallRecord[] {
    return this.sql
      .exec<CallRow>("SELECT * FROM calls WHERE status = 'in_flight' AND started_at <= ?", startedBy)
      .toArray()
      .map(toCall);
  }

  oldestInFlightStart(): number | undefined {
    const row = this.sql
      .exec<{ t: number | null }>("SELECT MIN(started_at) AS t FROM calls WHERE status = 'in_flight'")
      .one();
    return row.t ?? undefined;
  }

  /** The pools whose engine served a call of the program (its KV is there), as long as its calls are kept. */
  servedPools(): string[] {
    return this.sql
      .exec<{ pool: string }>("SELECT DISTINCT pool FROM calls WHERE pool != '' AND engine != ''")
      .toArray()
      .map((row) => row.pool);
  }

  /** Settled calls whose usage row has not reached D1 yet. */
  unrecordedCalls(): CallRecord[] {
    return this.sql
      .exec<CallRow>("SELECT * FROM calls WHERE status != 'in_flight' AND recorded = 0")
      .toArray()
      .map(toCall);
  }

  /** When the oldest settled call still waiting for D1 finished; undefined: none waits. */
  oldestUnrecordedFinish(): number | undefined {
    const row = this.sql
      .exec<{ t: number | null }>("SELECT MIN(finished_at) AS t FROM calls WHERE status != 'in_flight' AND recorded = 0")
      .one();
    return row.t ?? undefined;
  }

  /** Drops what an ended program no longer needs: threads and settled, recorded calls. */
  cleanUp(): void {
    this.sql.exec("DELETE FROM threads");
    this.sql.exec("DELETE FROM calls WHERE status != 'in_flight' AND recorded = 1");
  }
}
