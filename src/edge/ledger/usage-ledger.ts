import { DurableObject } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { z } from "zod";
import { type Database, database } from "../db/client.js";
import { AlarmSchedule } from "../durable/alarm-schedule.js";
import { edgeConfig, type Env } from "../env.js";
import { countedObjectD1 } from "../instrument/io-counts.js";
import { deliver, type DeliveryIo, QueryBudget } from "./delivery.js";
import { ledgerFlushAt, QUARANTINE_RETRY_MS } from "./flush-schedule.js";
import { batchesOf, isProgramItem, itemKey, type LedgerItem, statementsOf } from "./items.js";
import { LedgerPendingStore } from "./pending-store.js";
import { LedgerQuarantineStore, type QuarantinedItem } from "./quarantine-store.js";
import { ledgerShard } from "./access.js";
import { ShardHistory } from "../durable/shard-history.js";
import { HandOffInput, type HandOffResult, type LedgerStatus, NoteShardsInput } from "./types.js";

/** Rows (and summaries) read from storage per round of a flush: at 5 usage rows a statement, 4 D1 batches. */
const ROWS_PER_ROUND = 1_000;
/**
 * D1 batches per flush: each statement counts against a Worker invocation's D1 queries
 * (1,000 on the paid plan), so a backlog after a long outage goes out over several alarms
 * (the next is due at once when its oldest row is overdue).
 */
const BATCHES_PER_FLUSH = 10;
/**
 * D1 queries a flush may spend besides those batches (at most 10 × 50 statements): isolating
 * the rows D1 refuses (delivery.ts; one among 250 costs about 110) and retrying quarantined
 * ones. Together under the invocation's 1,000.
 */
const ISOLATION_QUERIES_PER_FLUSH = 400;
/** Quarantined items read per retry round. */
const QUARANTINE_ROWS_PER_ROUND = 250;

/**
 * One tenant's usage ledger (named by the tenant ID; a big tenant's is N objects: shards.ts): its programs hand it their settled
 * calls' rows and changed summaries (ledger/access.ts), and it takes them to D1 in one
 * batch within LEDGER_FLUSH_MS of the oldest one's settle, so D1 sees one write per tenant
 * per window instead of one per program. Rows live in the object's SQLite from the moment
 * a hand-off is answered (written in one transaction), so they survive eviction and D1
 * outages; they leave only once D1 took them, idempotent on the call ID. A row D1 refuses
 * while it answers moves to the quarantine (quarantine-store.ts), retried on its own schedule,
 * so it cannot hold back the tenant's other rows.
 */
export class UsageLedger extends DurableObject<Env> {
  private readonly pending: LedgerPendingStore;
  private readonly quarantine: LedgerQuarantineStore;
  private readonly history: ShardHistory;
  private readonly db: Database;
  private readonly alarms: AlarmSchedule;
  /** Whether this object's tables exist (a status read on a ledger never handed anything creates none). */
  private ready = false;
  /** D1 outages met in a row (batches D1 did not answer), and when the last was (in memory: an evicted ledger retries at once). */
  private failures = { count: 0, lastAt: 0 };
  /** Flushes run one after another, so a flush never misses rows stored while another was writing. */
  private flushQueue: Promise<void> = Promise.resolve();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.pending = new LedgerPendingStore(ctx.storage.sql);
    this.quarantine = new LedgerQuarantineStore(ctx.storage.sql);
    this.history = new ShardHistory(ctx.storage.sql);
    this.alarms = new AlarmSchedule(ctx.storage);
    this.db = database(countedObjectD1(env, "ledger"));
    void ctx.blockConcurrencyWhile(async () => {
      // An object from before the quarantine gets its table here.
      if (this.pending.exists()) this.ensureSchema();
      await this.alarms.load();
    });
  }

  /**
   * Takes a program's rows and summary into this ledger's storage. Answered once they are
   * stored: the program may then forget them. With LEDGER_FLUSH_MS 0 they also go to D1
   * before the answer (a failed write leaves them here for the alarm: they are safe either way).
   * A row already in quarantine stays there, once.
   */
  async handOff(raw: HandOffInput): Promise<HandOffResult> {
    const parsed = HandOffInput.safeParse(raw);
    if (!parsed.success) return { ok: false, error: "invalid_input", detail: z.prettifyError(parsed.error) };
    this.ensureSchema();
    await this.learnShards(parsed.data);
    const now = Date.now();
    this.ctx.storage.transactionSync(() => {
      for (const summary of parsed.data.programs) this.pending.putSummary(summary, now);
      for (const row of parsed.data.rows) if (!this.quarantine.holdsRow(row.callId)) this.pending.addRow(row, now);
    });
    if (this.flushMs() === 0) await this.flush();
    await this.scheduleAlarm();
    return { ok: true };
  }

  /** Shard 0: another shard saw the tenant with this many shards (ledger/shards.ts). */
  async noteShards(raw: NoteShardsInput): Promise<void> {
    const { shards } = NoteShardsInput.parse(raw);
    this.ensureSchema();
    this.history.noteShards(shards);
  }

  /** What is waiting for D1, quarantine apart (tests and operators). */
  async pendingCounts(): Promise<{ rows: number; summaries: number }> {
    return this.ready ? this.pending.pendingCounts() : { rows: 0, summaries: 0 };
  }

  /** What this ledger holds that D1 does not: pending and quarantined (GET /v1/usage, the export, the admin API). */
  async status(): Promise<LedgerStatus> {
    if (!this.ready) {
      const none = { count: 0, since: null };
      return { shards: 1, pending: { rows: 0, summaries: 0, oldestAt: null }, quarantined: { rows: none, summaries: none } };
    }
    return {
      shards: this.history.mostShards(),
      pending: { ...this.pending.pendingCounts(), oldestAt: this.pending.oldestDueFrom() ?? null },
      quarantined: this.quarantine.counts(),
    };
  }

  /** The quarantined items, oldest first, with D1's last error (the admin API). */
  async quarantined(limit: number): Promise<QuarantinedItem[]> {
    return this.ready ? this.quarantine.list(Math.max(0, Math.min(limit, 1_000))) : [];
  }

  override async alarm(): Promise<void> {
    this.alarms.forget();
    if (!this.ready) return;
    await this.flush();
    await this.scheduleAlarm();
  }

  private ensureSchema(): void {
    if (this.ready) return;
    this.pending.ensureSchema();
    this.quarantine.ensureSchema();
    this.history.ensureSchema();
    this.ready = true;
  }

  /**
   * The first hand-off with a larger N than this shard saw: shard 0 learns it before the rows
   * are taken (a failure fails the hand-off, which the program retries), so the reports
   * read every shard that may hold rows. N = 1 costs nothing.
   */
  private async learnShards(input: { shard: number; shards: number; rows: { tenantId: string }[]; programs: { tenantId: string }[] }): Promise<void> {
    if (input.shards <= this.history.mostShards()) return;
    const tenantId = input.rows[0]?.tenantId ?? input.programs[0]?.tenantId;
    if (tenantId === undefined) return;
    if (input.shard !== 0) await ledgerShard(this.env, tenantId, 0).noteShards({ shards: input.shards });
    this.history.noteShards(input.shards);
  }

  private flushMs(): number {
    return edgeConfig(this.env).ledgerFlushMs;
  }

  private flush(): Promise<void> {
    const run = this.flushQueue.then(() => this.flushAll());
    this.flushQueue = run.catch(() => undefined);
    return run;
  }

  /** The pending items, then the quarantined ones due, sharing one budget for isolating refusals. */
  private async flushAll(): Promise<void> {
    const budget = new QueryBudget(ISOLATION_QUERIES_PER_FLUSH);
    if (await this.flushPending(budget)) await this.retryQuarantined(budget);
  }

  /**
   * Everything pending when it starts, in D1 batches of D1_BATCH_MAX statements: summaries first (a usage
   * row references its program's row), then the rows. Each batch is one D1 transaction;
   * what it carried leaves this object's storage only after D1 answered, so a crash in
   * between resends it (ON CONFLICT on the call ID: never twice). A batch D1 does not
   * answer stops the flush, retried on the alarm with backoff (flush-schedule.ts); one it
   * refuses is split until the refused items are found and quarantined (delivery.ts), and
   * the flush goes on. False: it stopped early (an outage, or the budget spent).
   */
  private async flushPending(budget: QueryBudget): Promise<boolean> {
    let batches = 0;
    while (batches < BATCHES_PER_FLUSH) {
      const items = this.pending.items(ROWS_PER_ROUND);
      if (items.length === 0) return true;
      for (const batch of batchesOf(this.db, items)) {
        if (batches >= BATCHES_PER_FLUSH) return false;
        batches += 1;
        if (!(await this.deliverBatch(batch, this.pendingIo, budget))) return false;
      }
      // Another round only for a backlog: rows handed over during this flush wait for their own
      // due time, or a flush under steady traffic would chase each arrival with a D1 query.
      if (items.length < ROWS_PER_ROUND) return true;
    }
    return false;
  }

  /** Quarantined items due now, in batches like the pending ones; a refused one waits QUARANTINE_RETRY_MS again. */
  private async retryQuarantined(budget: QueryBudget): Promise<void> {
    for (;;) {
      const items = this.quarantine.due(Date.now(), QUARANTINE_ROWS_PER_ROUND);
      if (items.length === 0) return;
      for (const batch of batchesOf(this.db, items)) {
        if (!budget.take(statementsOf(this.db, batch).length)) return;
        if (!(await this.deliverBatch(batch, this.quarantineIo, budget))) return;
      }
    }
  }

  /** One batch; false when the flush must stop (D1 did not answer, or the budget is spent). */
  private async deliverBatch(batch: LedgerItem[], io: DeliveryIo<LedgerItem>, budget: QueryBudget): Promise<boolean> {
    const result = await deliver(batch, io, budget);
    if (result.outcome === "outage") {
      this.failures = { count: this.failures.count + 1, lastAt: Date.now() };
      console.error("UsageLedger: D1 did not answer, will retry", result.error);
      return false;
    }
    // D1 answered (it took the batch, or refused items of it): the backoff starts over.
    this.failures = { count: 0, lastAt: 0 };
    return result.outcome === "done";
  }

  /** Sends items in one D1 batch; D1 answering SELECT 1 tells a refusal from an outage. */
  private readonly d1: Pick<DeliveryIo<LedgerItem>, "send" | "cost" | "answers"> = {
    send: async (items) => {
      const [first, ...rest] = statementsOf(this.db, items).map((statement) => statement.write);
      if (first) await this.db.batch([first, ...rest]);
    },
    cost: (items) => statementsOf(this.db, items).length,
    answers: async () => {
      await this.db.run(sql`SELECT 1`);
      return true;
    },
  };

  /** D1 took `items`: they leave `store`, and rows refused for want of their program's row are tried again now that D1 has it. */
  private delivered(store: LedgerPendingStore | LedgerQuarantineStore, items: readonly LedgerItem[]): void {
    this.ctx.storage.transactionSync(() => {
      store.remove(items);
      this.quarantine.dueNow(items.filter(isProgramItem).map((item) => item.summary.id));
    });
  }

  private readonly pendingIo: DeliveryIo<LedgerItem> = {
    ...this.d1,
    delivered: (items) => this.delivered(this.pending, items),
    refused: (item, error) => {
      const now = Date.now();
      console.error(`UsageLedger: D1 refused ${item.kind} ${itemKey(item)}; quarantined, tried again every ${QUARANTINE_RETRY_MS / 60_000} min`, error);
      this.ctx.storage.transactionSync(() => {
        this.pending.remove([item]);
        this.quarantine.refused(item, errorText(error), now, now + QUARANTINE_RETRY_MS);
      });
    },
  };

  private readonly quarantineIo: DeliveryIo<LedgerItem> = {
    ...this.d1,
    delivered: (items) => this.delivered(this.quarantine, items),
    refused: (item, error) => {
      const now = Date.now();
      console.error(`UsageLedger: D1 still refuses quarantined ${item.kind} ${itemKey(item)}`, error);
      this.quarantine.refused(item, errorText(error), now, now + QUARANTINE_RETRY_MS);
    },
  };

  /** One alarm: the next batch (LEDGER_FLUSH_MS after the oldest pending row's settle), a D1 retry, or a quarantined item's retry. */
  private async scheduleAlarm(): Promise<void> {
    const { count: failures, lastAt: lastFailureAt } = this.failures;
    const due: number[] = [];
    const oldest = this.pending.oldestDueFrom();
    if (oldest !== undefined) due.push(ledgerFlushAt({ oldestPendingAt: oldest, flushMs: this.flushMs(), failures, lastFailureAt }));
    const retry = this.quarantine.nextAttemptAt();
    // Not before an outage's backoff is over.
    if (retry !== undefined) due.push(Math.max(retry, ledgerFlushAt({ oldestPendingAt: retry, flushMs: 0, failures, lastFailureAt })));
    await this.alarms.moveTo(due.length > 0 ? Math.min(...due) : null);
  }
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 1_000);
}
