import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { type Database, database } from "../db/client.js";
import { D1_BATCH_MAX, type LedgerWrite, recordUsageRows, writeProgramSummaries } from "../db/ledger.js";
import { AlarmSchedule } from "../durable/alarm-schedule.js";
import { edgeConfig, type Env } from "../env.js";
import { countedObjectD1 } from "../instrument/io-counts.js";
import { ledgerFlushAt } from "./flush-schedule.js";
import { LedgerPendingStore, type PendingSummary } from "./pending-store.js";
import { HandOffInput, type HandOffResult, type LedgerUsageRow } from "./types.js";

/** Rows (and summaries) read from storage per round of a flush: at 5 usage rows a statement, 4 D1 batches. */
const ROWS_PER_ROUND = 1_000;
/**
 * D1 batches per flush: each statement counts against a Worker invocation's D1 queries
 * (1,000 on the paid plan), so a backlog after a long outage goes out over several alarms
 * (the next is due at once when its oldest row is overdue).
 */
const BATCHES_PER_FLUSH = 10;

/**
 * One tenant's usage ledger (named by the tenant ID): its programs hand it their settled
 * calls' rows and changed summaries (ledger/access.ts), and it takes them to D1 in one
 * batch within LEDGER_FLUSH_MS of the oldest one's settle, so D1 sees one write per tenant
 * per window instead of one per program. Rows live in the object's SQLite from the moment
 * a hand-off is answered (written in one transaction), so they survive eviction and D1
 * outages; they leave only once D1 took them, idempotent on the call ID.
 */
export class UsageLedger extends DurableObject<Env> {
  private readonly pending: LedgerPendingStore;
  private readonly db: Database;
  private readonly alarms: AlarmSchedule;
  /** D1 batches that failed in a row, and when the last did (in memory: an evicted ledger retries at once). */
  private failures = { count: 0, lastAt: 0 };
  /** Flushes run one after another, so a flush never misses rows stored while another was writing. */
  private flushQueue: Promise<void> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.pending = new LedgerPendingStore(ctx.storage.sql);
    this.alarms = new AlarmSchedule(ctx.storage);
    this.db = database(countedObjectD1(env, "ledger"));
    void ctx.blockConcurrencyWhile(async () => {
      this.pending.ensureSchema();
      await this.alarms.load();
    });
  }

  /**
   * Takes a program's rows and summary into this ledger's storage. Answered once they are
   * stored: the program may then forget them. With LEDGER_FLUSH_MS 0 they also go to D1
   * before the answer (a failed write leaves them here for the alarm: they are safe either way).
   */
  async handOff(raw: HandOffInput): Promise<HandOffResult> {
    const parsed = HandOffInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input", detail: z.prettifyError(parsed.error) };
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      for (const summary of parsed.data.programs) this.pending.putSummary(summary, now);
      for (const row of parsed.data.rows) this.pending.addRow(row, now);
    });
    if (this.flushMs() === 0) await this.flush();
    await this.scheduleAlarm();
    return { ok: true };
  }

  /** What is waiting for D1 (tests and operators). */
  async pendingCounts(): Promise<{ rows: number; summaries: number }> {
    return this.pending.pendingCounts();
  }

  override async alarm(): Promise<void> {
    this.alarms.forget();
    await this.flush();
    await this.scheduleAlarm();
  }

  private flushMs(): number {
    return edgeConfig(this.env).ledgerFlushMs;
  }

  private flush(): Promise<void> {
    const run = this.flushQueue.then(() => this.flushPending());
    this.flushQueue = run.catch(() => undefined);
    return run;
  }

  /**
   * Everything pending when it starts, in D1 batches of D1_BATCH_MAX statements: summaries first (a usage
   * row references its program's row), then the rows. Each batch is one D1 transaction;
   * what it carried leaves this object's storage only after D1 answered, so a crash in
   * between resends it (ON CONFLICT on the call ID: never twice). A failure stops the
   * flush and is retried on the alarm with backoff (flush-schedule.ts).
   */
  private async flushPending(): Promise<void> {
    let batches = 0;
    while (batches < BATCHES_PER_FLUSH) {
      const summaries = this.pending.summaries(ROWS_PER_ROUND);
      const rows = summaries.length < ROWS_PER_ROUND ? this.pending.rows(ROWS_PER_ROUND - summaries.length) : [];
      if (summaries.length === 0 && rows.length === 0) return;
      const statements: { write: LedgerWrite; summaries: PendingSummary[]; rows: LedgerUsageRow[] }[] = [
        ...writeProgramSummaries(this.db, summaries, (s) => s.summary).map(({ write, items }) => ({ write, summaries: items, rows: [] })),
        ...recordUsageRows(this.db, rows).map(({ write, items }) => ({ write, summaries: [], rows: items })),
      ];
      for (let i = 0; i < statements.length && batches < BATCHES_PER_FLUSH; i += D1_BATCH_MAX) {
        const part = statements.slice(i, i + D1_BATCH_MAX);
        batches += 1;
        const [first, ...rest] = part.map((s) => s.write);
        if (!first) continue;
        try {
          await this.db.batch([first, ...rest]);
        } catch (error) {
          this.failures = { count: this.failures.count + 1, lastAt: Date.now() };
          console.error("UsageLedger: D1 batch failed, will retry", error);
          return;
        }
        this.ctx.storage.transactionSync(() => {
          this.pending.removeSummaries(part.flatMap((s) => s.summaries));
          this.pending.removeRows(part.flatMap((s) => s.rows.map((row) => row.callId)));
        });
        this.failures = { count: 0, lastAt: 0 };
      }
      // Another round only for a backlog: rows handed over during this flush wait for their own
      // due time, or a flush under steady traffic would chase each arrival with a D1 query.
      if (summaries.length + rows.length < ROWS_PER_ROUND) return;
    }
  }

  /** One alarm: the next batch (LEDGER_FLUSH_MS after the oldest pending row's settle), or a D1 retry. */
  private async scheduleAlarm(): Promise<void> {
    const oldest = this.pending.oldestDueFrom();
    const next =
      oldest === undefined
        ? null
        : ledgerFlushAt({ oldestPendingAt: oldest, flushMs: this.flushMs(), failures: this.failures.count, lastFailureAt: this.failures.lastAt });
    await this.alarms.moveTo(next);
  }
}
