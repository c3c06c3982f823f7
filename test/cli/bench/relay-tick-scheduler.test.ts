import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TickScheduler } from "../../../src/cli/bench/relay-tick-scheduler.js";

/*
 * The token source's timer batching: jobs due in the same millisecond share one timer
 * callback, and a tick that runs late keeps every job on its absolute schedule (the
 * source catches up instead of lowering its rate).
 */

describe("TickScheduler", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("fires every job due in the same tick from one timer callback", () => {
    const fired: number[] = [];
    const scheduler = new TickScheduler<number>((job) => fired.push(job), () => Date.now());
    const start = Date.now();
    // 4.1, 4.4, 4.7 ms: all in the tick that ends at 5 ms (due times round up).
    for (let job = 0; job < 300; job++) scheduler.schedule(job, start + 4.1 + (job % 3) * 0.3);
    scheduler.schedule(1_000, start + 7);
    vi.advanceTimersByTime(5);
    expect(fired).toHaveLength(300);
    expect(scheduler.wakeups).toBe(1);
    vi.advanceTimersByTime(2);
    expect(fired).toHaveLength(301);
    expect(scheduler.wakeups).toBe(2);
  });

  it("keeps a paced job on its absolute schedule when a tick runs late", () => {
    const firedAt: number[] = [];
    const start = Date.now();
    // The clock the scheduler reads runs ahead of its timers once the loop has been held up.
    let heldUpMs = 0;
    const now = () => Date.now() + heldUpMs;
    let due = start + 10;
    const scheduler = new TickScheduler<string>(() => {
      firedAt.push(now() - start);
      due += 10;
      if (firedAt.length < 5) scheduler.schedule("stream", due);
    }, now);
    scheduler.schedule("stream", due);
    // The timer due at 10 ms runs at 25 ms: the tokens due at 10 and 20 go at once, then back on the 10 ms grid.
    heldUpMs = 15;
    vi.advanceTimersByTime(40);
    expect(firedAt.slice(0, 2)).toEqual([25, 25]);
    expect(firedAt.slice(2)).toEqual([30, 40, 50]);
  });

  it("drops pending jobs when stopped", () => {
    const fired: string[] = [];
    const scheduler = new TickScheduler<string>((job) => fired.push(job), () => Date.now());
    scheduler.schedule("a", Date.now() + 3);
    scheduler.stop();
    scheduler.schedule("b", Date.now() + 3);
    vi.advanceTimersByTime(10);
    expect(fired).toEqual([]);
  });
});
