import { describe, expect, it } from "vitest";
import { deliver, type DeliveryIo, QueryBudget } from "../../src/edge/ledger/delivery";

/*
 * The split of a failed D1 batch (ledger/delivery.ts) against a fake D1 that behaves like
 * the real one where it matters: a batch is one transaction (one refused item fails all of
 * it, and none of it is kept), and a D1 that is down answers nothing, a probe neither.
 * The ledger's own tests (usage-ledger.test.ts) run it against real local D1; these cover
 * what local D1 cannot be made to do: go down in the middle of a split, and a budget.
 */

class FakeD1 {
  readonly stored = new Set<number>();
  sends = 0;
  /** D1 queries made: statements sent and probes. */
  spent = 0;
  /** Sends answered before D1 goes down (Infinity: it stays up). */
  upFor = Number.POSITIVE_INFINITY;

  constructor(private readonly refuses: ReadonlySet<number>) {}

  private get up(): boolean {
    return this.sends <= this.upFor;
  }

  io(delivered: number[], refused: number[]): DeliveryIo<number> {
    return {
      send: async (items) => {
        this.sends += 1;
        this.spent += Math.ceil(items.length / 5);
        if (!this.up) throw new Error("D1_ERROR: Network connection lost.");
        const bad = items.find((item) => this.refuses.has(item));
        if (bad !== undefined) throw new Error(`D1_ERROR: FOREIGN KEY constraint failed (${bad})`);
        for (const item of items) this.stored.add(item);
      },
      cost: (items) => Math.ceil(items.length / 5),
      answers: async () => {
        this.spent += 1;
        if (!this.up) throw new Error("D1_ERROR: Network connection lost.");
        return true;
      },
      delivered: (items) => delivered.push(...items),
      refused: (item) => refused.push(item),
    };
  }
}

const items = (n: number) => Array.from({ length: n }, (_, i) => i);

describe("delivering a batch D1 may refuse part of", () => {
  it("sends every item D1 takes and hands back exactly the ones it refuses", async () => {
    const d1 = new FakeD1(new Set([3, 11, 12, 97]));
    const delivered: number[] = [];
    const refused: number[] = [];
    expect(await deliver(items(100), d1.io(delivered, refused), new QueryBudget(400))).toEqual({ outcome: "done" });
    expect(refused.sort((a, b) => a - b)).toEqual([3, 11, 12, 97]);
    expect(delivered.sort((a, b) => a - b)).toEqual(items(100).filter((i) => ![3, 11, 12, 97].includes(i)));
    expect([...d1.stored].sort((a, b) => a - b)).toEqual(delivered);
  });

  it("finds one refused row among a full batch's 250 for 110 more D1 queries (16 batches and 2 probes)", async () => {
    const d1 = new FakeD1(new Set([137]));
    const refused: number[] = [];
    expect(await deliver(items(250), d1.io([], refused), new QueryBudget(400))).toEqual({ outcome: "done" });
    expect(refused).toEqual([137]);
    // Beyond the failed batch itself (50 statements of 5 rows): the ledger's budget per alarm (400) covers about 10 such rows.
    expect({ queries: d1.spent - 50, batches: d1.sends - 1 }).toEqual({ queries: 110, batches: 16 });
  });

  it("refuses nothing when D1 is down from the start: an outage", async () => {
    const d1 = new FakeD1(new Set());
    d1.upFor = 0;
    const delivered: number[] = [];
    const refused: number[] = [];
    expect(await deliver(items(20), d1.io(delivered, refused), new QueryBudget(400))).toMatchObject({ outcome: "outage" });
    expect(refused).toEqual([]);
    expect(delivered).toEqual([]);
  });

  it("stops as an outage, refusing nothing, when D1 goes down in the middle of the split", async () => {
    const d1 = new FakeD1(new Set([15]));
    // The batch fails (item 15), the probe answers, the first half goes through, then D1 is gone.
    d1.upFor = 2;
    const delivered: number[] = [];
    const refused: number[] = [];
    expect(await deliver(items(20), d1.io(delivered, refused), new QueryBudget(400))).toMatchObject({ outcome: "outage" });
    // The good items of the second half failed because D1 was down: none is taken for a refused one.
    expect(refused).toEqual([]);
    expect(delivered).toEqual(items(10));
    expect([...d1.stored]).toEqual(items(10));
  });

  it("stops when its budget of D1 queries is spent, having refused only what D1 refuses", async () => {
    const d1 = new FakeD1(new Set([1, 2, 40, 41, 80, 81, 120, 121]));
    const delivered: number[] = [];
    const refused: number[] = [];
    expect(await deliver(items(200), d1.io(delivered, refused), new QueryBudget(90))).toEqual({ outcome: "over_budget" });
    // The first send is the caller's to count; the split spent at most its 90.
    expect(d1.spent - Math.ceil(200 / 5)).toBeLessThanOrEqual(90);
    expect(refused.length).toBeGreaterThan(0);
    for (const item of refused) expect([1, 2, 40, 41, 80, 81, 120, 121]).toContain(item);
    // What was left untried is neither delivered nor refused: it stays pending for the next alarm.
    expect(delivered.length + refused.length).toBeLessThan(200);
  });
});
