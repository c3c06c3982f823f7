import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CallLifecycle } from "../../src/edge/chat/call-lifecycle";
import type { SettleCallInput } from "../../src/edge/program/types";

const RENEW_MS = 40_000;
const TIMEOUT_MS = 900_000;

const settlement = (status: SettleCallInput["status"] = "ok"): SettleCallInput => ({
  callId: "call_x",
  status,
  promptTokens: 10,
  cachedTokens: 0,
  completionTokens: 5,
  usageSource: "engine",
  serviceMs: 100,
  queueMs: 1,
  engine: "e",
  finishedAt: 0,
});

function lifecycle() {
  const renewals: number[] = [];
  const recorded: SettleCallInput[] = [];
  const kept: Promise<unknown>[] = [];
  const call = new CallLifecycle({
    renewEveryMs: RENEW_MS,
    timeoutMs: TIMEOUT_MS,
    renewLease: async () => {
      renewals.push(Date.now());
    },
    record: async (input) => {
      recorded.push(input);
    },
    keepAlive: (work) => {
      kept.push(work);
    },
  });
  return { call, renewals, recorded, settled: () => Promise.all(kept) };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("CallLifecycle", () => {
  it("renews the lease while the call is in flight and stops the moment its settlement is known", async () => {
    const { call, renewals, recorded, settled } = lifecycle();
    await vi.advanceTimersByTimeAsync(3 * RENEW_MS + 1);
    expect(renewals).toHaveLength(3);

    // A stream's settlement is a promise that resolves when the stream ends.
    let end!: (input: SettleCallInput) => void;
    expect(call.settle(new Promise<SettleCallInput>((resolve) => (end = resolve)))).toBe(true);
    await vi.advanceTimersByTimeAsync(RENEW_MS);
    expect(renewals).toHaveLength(4);
    expect(call.renewing).toBe(true);

    end(settlement("cancelled"));
    await settled();
    expect(call.renewing).toBe(false);
    await vi.advanceTimersByTimeAsync(10 * RENEW_MS);
    expect(renewals).toHaveLength(4);
    expect(recorded.map((r) => r.status)).toEqual(["cancelled"]);
  });

  it("settles exactly once: a second settlement is ignored", async () => {
    const { call, recorded, settled } = lifecycle();
    expect(call.settle(settlement("ok"))).toBe(true);
    expect(call.settle(settlement("error"))).toBe(false);
    await settled();
    expect(recorded.map((r) => r.status)).toEqual(["ok"]);
  });

  it("aborts its deadline after the timeout and stops renewing even if no settlement ever comes", async () => {
    const { call, renewals } = lifecycle();
    const aborted = vi.fn();
    call.deadline.addEventListener("abort", aborted);
    await vi.advanceTimersByTimeAsync(TIMEOUT_MS - 1);
    expect(aborted).not.toHaveBeenCalled();
    const before = renewals.length;
    expect(before).toBe(Math.floor((TIMEOUT_MS - 1) / RENEW_MS));
    await vi.advanceTimersByTimeAsync(1);
    expect(aborted).toHaveBeenCalledOnce();
    await vi.advanceTimersByTimeAsync(10 * RENEW_MS);
    expect(renewals).toHaveLength(before);
    expect(call.renewing).toBe(false);
  });
});
