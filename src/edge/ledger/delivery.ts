/*
 * Taking a batch of items to D1 when a batch can fail for two different reasons. A D1
 * batch is one transaction: one row D1 refuses (a constraint: a usage row whose program
 * row is missing, say) fails the whole batch, and retried whole it would fail forever and
 * hold back every other row of the tenant. But a batch also fails when D1 does not answer
 * at all (an outage), and then every row must simply wait.
 *
 * So a failed batch is followed by a probe (a query no row can make fail, SELECT 1). No
 * answer: an outage; everything stays where it is, for the caller's backoff. An answer:
 * the batch was refused, and it is split in halves, each sent on its own, recursively,
 * down to single items (a multi-row statement becomes single-row ones on the way). Halves
 * that go through are done; an item that fails alone is probed for once more (D1 may have
 * gone down meanwhile) and, D1 answering, is the one D1 refuses: the caller quarantines
 * it. Every write is idempotent (ON CONFLICT on the call ID; a program row is only
 * replaced by one further along), so sending an item again after an unknown outcome
 * never counts it twice.
 *
 * Isolating one refused item among n costs about 2·log2(n) batches; D1 counts each
 * statement against the invocation's query limit, so the isolation spends from a budget
 * and stops when it runs out: what is left waits for the next alarm (due at once).
 */

export interface DeliveryIo<T> {
  /** Sends the items to D1 in one batch; throws what D1 threw. */
  send(items: readonly T[]): Promise<void>;
  /** D1 queries a send of these items costs (its statements). */
  cost(items: readonly T[]): number;
  /** Whether D1 answers at all: a query that no row can make fail. */
  answers(): Promise<boolean>;
  /** D1 holds these items. */
  delivered(items: readonly T[]): void;
  /** D1 refused this item on its own while it answered. */
  refused(item: T, error: unknown): void;
}

/** done: every item was delivered or refused; outage: D1 did not answer (nothing refused since); over_budget: stopped, the rest untried. */
export type Delivery = { outcome: "done" } | { outcome: "outage"; error: unknown } | { outcome: "over_budget" };

/** D1 queries (statements and probes) that isolating refused items may still spend. */
export class QueryBudget {
  constructor(private left: number) {}

  take(queries: number): boolean {
    if (queries > this.left) return false;
    this.left -= queries;
    return true;
  }
}

const DONE: Delivery = { outcome: "done" };

/** Sends `items` as one batch (its queries are the caller's to count), isolating what D1 refuses if it fails. */
export async function deliver<T>(items: readonly T[], io: DeliveryIo<T>, budget: QueryBudget): Promise<Delivery> {
  try {
    await io.send(items);
  } catch (error) {
    if (!budget.take(1)) return { outcome: "over_budget" };
    if (!(await probe(io))) return { outcome: "outage", error };
    return await isolate(items, error, io, budget);
  }
  io.delivered(items);
  return DONE;
}

/** `items` failed as one batch while D1 answered: each half on its own, down to the item D1 refuses. */
async function isolate<T>(items: readonly T[], error: unknown, io: DeliveryIo<T>, budget: QueryBudget): Promise<Delivery> {
  const [only] = items;
  if (items.length === 1 && only !== undefined) {
    io.refused(only, error);
    return DONE;
  }
  const middle = Math.ceil(items.length / 2);
  for (const half of [items.slice(0, middle), items.slice(middle)]) {
    if (!budget.take(io.cost(half))) return { outcome: "over_budget" };
    let failure: { error: unknown } | undefined;
    try {
      await io.send(half);
    } catch (halfError) {
      failure = { error: halfError };
    }
    if (!failure) {
      io.delivered(half);
      continue;
    }
    // A single item is refused only while D1 still answers: it may have gone down since the last probe.
    if (half.length === 1) {
      if (!budget.take(1)) return { outcome: "over_budget" };
      if (!(await probe(io))) return { outcome: "outage", error: failure.error };
    }
    const result = await isolate(half, failure.error, io, budget);
    if (result.outcome !== "done") return result;
  }
  return DONE;
}

async function probe<T>(io: DeliveryIo<T>): Promise<boolean> {
  try {
    return await io.answers();
  } catch {
    return false;
  }
}
