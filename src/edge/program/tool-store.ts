import type { ToolEvent } from "../../protocol/tool-events.js";
import { type Bucket, fullBucket, msUntil, refill } from "../limits/bucket.js";

/*
 * A program's tool state, in its ProgramSession's SQLite: what the client said about
 * its tools (POST /v1/programs/{id}/events). Bounded, not a log: the runs still in
 * flight (at most MAX_TOOL_RUNS, oldest dropped first), per thread the last start and
 * finish (at most MAX_TOOL_THREADS threads, least recently updated dropped first), two
 * counters, and the per-program event bucket.
 *
 * Matching a finish to its start, as the pool's readiness predictor does: by
 * tool_call_id (on any thread), else the oldest run of that tool on the thread, else
 * the oldest run on the thread. A start without tool_call_id is keyed by its tool
 * name on its thread (two unnamed runs of one tool cannot be told apart anyway).
 * A new LLM call on a thread ends that thread's runs: the agent only calls the model
 * again once its tools returned.
 */

/** Runs in flight kept per program. */
export const MAX_TOOL_RUNS = 64;
/** Threads whose last start / finish is kept. */
export const MAX_TOOL_THREADS = 64;
/**
 * Events accepted per program per minute (a token bucket: one burst of this many,
 * then this rate). Events are hints and do not count toward the tenant's rpm; this
 * cap stops one program from flooding its object and the pool.
 */
export const TOOL_EVENTS_PER_MINUTE = 600;

export const TOOL_SCHEMA = `
CREATE TABLE IF NOT EXISTS tool_runs (
  run_key TEXT PRIMARY KEY,
  thread TEXT NOT NULL,
  tool TEXT,
  tool_call_id TEXT,
  started_at INTEGER NOT NULL,
  expected_duration_ms REAL,
  deadline INTEGER,
  seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_threads (
  thread TEXT PRIMARY KEY,
  last_started_at INTEGER,
  last_finished_at INTEGER,
  seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tool_summary (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  bucket_level REAL NOT NULL,
  bucket_at INTEGER NOT NULL,
  started INTEGER NOT NULL,
  finished INTEGER NOT NULL,
  last_started_at INTEGER,
  last_finished_at INTEGER,
  seq INTEGER NOT NULL
);
`;

export interface ToolRunState {
  thread: string;
  tool: string | null;
  toolCallId: string | null;
  startedAt: number;
  expectedDurationMs: number | null;
  /** Epoch ms. */
  deadline: number | null;
}

export interface ToolThreadState {
  thread: string;
  lastStartedAt: number | null;
  lastFinishedAt: number | null;
}

export interface ToolsState {
  /** Oldest first. */
  inFlight: ToolRunState[];
  lastStartedAt: number | null;
  lastFinishedAt: number | null;
  /** Most recently updated first. */
  threads: ToolThreadState[];
  events: { started: number; finished: number };
}

type RunRow = {
  run_key: string;
  thread: string;
  tool: string | null;
  tool_call_id: string | null;
  started_at: number;
  expected_duration_ms: number | null;
  deadline: number | null;
};

type SummaryRow = {
  bucket_level: number;
  bucket_at: number;
  started: number;
  finished: number;
  last_started_at: number | null;
  last_finished_at: number | null;
  seq: number;
};

export class ToolStore {
  constructor(private readonly sql: SqlStorage) {}

  ensureSchema(): void {
    this.sql.exec(TOOL_SCHEMA);
  }

  /**
   * Takes `count` events from the program's bucket; answers the ms until they would
   * fit when they do not (and takes nothing). Call inside the events' transaction.
   */
  take(count: number, now: number): { ok: true } | { ok: false; retryAfterMs: number } {
    const summary = this.#summary(now);
    const bucket = refill({ level: summary.bucket_level, at: summary.bucket_at }, TOOL_EVENTS_PER_MINUTE, now);
    if (bucket.level < count) return { ok: false, retryAfterMs: msUntil(bucket, TOOL_EVENTS_PER_MINUTE, count) };
    this.#writeBucket({ level: bucket.level - count, at: bucket.at });
    return { ok: true };
  }

  /** Applies one accepted event at `now`. */
  apply(event: ToolEvent, now: number): void {
    const seq = this.#nextSeq(now);
    if (event.type === "tool_started") {
      const key = event.tool_call_id ?? `${event.thread}\u0000tool:${event.tool ?? ""}`;
      this.sql.exec(
        `INSERT OR REPLACE INTO tool_runs (run_key, thread, tool, tool_call_id, started_at, expected_duration_ms, deadline, seq)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        key,
        event.thread,
        event.tool ?? null,
        event.tool_call_id ?? null,
        now,
        event.expected_duration_ms ?? null,
        event.deadline ?? null,
        seq,
      );
      this.sql.exec(
        `DELETE FROM tool_runs WHERE run_key IN (SELECT run_key FROM tool_runs ORDER BY seq DESC LIMIT -1 OFFSET ?)`,
        MAX_TOOL_RUNS,
      );
      this.sql.exec("UPDATE tool_summary SET started = started + 1, last_started_at = ? WHERE id = 1", now);
      this.#touchThread(event.thread, "last_started_at", now, seq);
      return;
    }
    const run = this.#matchFinish(event);
    if (run !== undefined) this.sql.exec("DELETE FROM tool_runs WHERE run_key = ?", run.run_key);
    this.sql.exec("UPDATE tool_summary SET finished = finished + 1, last_finished_at = ? WHERE id = 1", now);
    this.#touchThread(run?.thread ?? event.thread, "last_finished_at", now, seq);
  }

  /** A new LLM call on the thread: its tools have returned. */
  endThreadRuns(thread: string): void {
    this.sql.exec("DELETE FROM tool_runs WHERE thread = ?", thread);
  }

  /** The program ended: nothing is in flight any more (counters and last times stay). */
  clearRuns(): void {
    this.sql.exec("DELETE FROM tool_runs");
  }

  state(): ToolsState {
    const runs = this.sql.exec<RunRow>("SELECT * FROM tool_runs ORDER BY seq").toArray();
    const threads = this.sql
      .exec<{ thread: string; last_started_at: number | null; last_finished_at: number | null }>(
        "SELECT thread, last_started_at, last_finished_at FROM tool_threads ORDER BY seq DESC",
      )
      .toArray();
    const summary = this.sql.exec<SummaryRow>("SELECT * FROM tool_summary WHERE id = 1").toArray()[0];
    return {
      inFlight: runs.map((row) => ({
        thread: row.thread,
        tool: row.tool,
        toolCallId: row.tool_call_id,
        startedAt: row.started_at,
        expectedDurationMs: row.expected_duration_ms,
        deadline: row.deadline,
      })),
      lastStartedAt: summary?.last_started_at ?? null,
      lastFinishedAt: summary?.last_finished_at ?? null,
      threads: threads.map((row) => ({ thread: row.thread, lastStartedAt: row.last_started_at, lastFinishedAt: row.last_finished_at })),
      events: { started: summary?.started ?? 0, finished: summary?.finished ?? 0 },
    };
  }

  #matchFinish(event: ToolEvent): RunRow | undefined {
    if (event.tool_call_id !== undefined) {
      const byId = this.sql.exec<RunRow>("SELECT * FROM tool_runs WHERE run_key = ?", event.tool_call_id).toArray()[0];
      if (byId) return byId;
    }
    if (event.tool !== undefined) {
      const byTool = this.sql
        .exec<RunRow>("SELECT * FROM tool_runs WHERE thread = ? AND tool = ? ORDER BY seq LIMIT 1", event.thread, event.tool)
        .toArray()[0];
      if (byTool) return byTool;
    }
    return this.sql.exec<RunRow>("SELECT * FROM tool_runs WHERE thread = ? ORDER BY seq LIMIT 1", event.thread).toArray()[0];
  }

  #touchThread(thread: string, column: "last_started_at" | "last_finished_at", at: number, seq: number): void {
    this.sql.exec(
      `INSERT INTO tool_threads (thread, ${column}, seq) VALUES (?, ?, ?)
       ON CONFLICT(thread) DO UPDATE SET ${column} = excluded.${column}, seq = excluded.seq`,
      thread,
      at,
      seq,
    );
    this.sql.exec(
      `DELETE FROM tool_threads WHERE thread IN (SELECT thread FROM tool_threads ORDER BY seq DESC LIMIT -1 OFFSET ?)`,
      MAX_TOOL_THREADS,
    );
  }

  /** The summary row, created full on first use. */
  #summary(now: number): SummaryRow {
    const row = this.sql.exec<SummaryRow>("SELECT * FROM tool_summary WHERE id = 1").toArray()[0];
    if (row) return row;
    const bucket = fullBucket(TOOL_EVENTS_PER_MINUTE, now);
    this.sql.exec(
      "INSERT INTO tool_summary (id, bucket_level, bucket_at, started, finished, seq) VALUES (1, ?, ?, 0, 0, 0)",
      bucket.level,
      bucket.at,
    );
    return { bucket_level: bucket.level, bucket_at: bucket.at, started: 0, finished: 0, last_started_at: null, last_finished_at: null, seq: 0 };
  }

  #writeBucket(bucket: Bucket): void {
    this.sql.exec("UPDATE tool_summary SET bucket_level = ?, bucket_at = ? WHERE id = 1", bucket.level, bucket.at);
  }

  /** Insertion order of runs and threads (times may tie within one batch). */
  #nextSeq(now: number): number {
    const seq = this.#summary(now).seq + 1;
    this.sql.exec("UPDATE tool_summary SET seq = ? WHERE id = 1", seq);
    return seq;
  }
}
