import type { QueuedCall, QueueSettings } from "../../src/core/queue.js";

/** Small, readable queue settings for tests: bounds 1 s, 2 s, 4 s; no starvation floor to speak of. */
export const TEST_QUEUE_SETTINGS: QueueSettings = {
  levels: 4,
  firstBoundMs: 1_000,
  growth: 2,
  priorityValue: "atlas",
  starvationRatio: 4,
  starvationMinServiceMs: 1,
  tenantHalfLifeMs: 60_000,
};

let counter = 0;

export function makeCall(overrides: Partial<QueuedCall> = {}): QueuedCall {
  counter += 1;
  return {
    callId: `call_${counter}`,
    tenantId: "ten_a",
    programId: `prog_${counter}`,
    threadId: "main",
    serviceMs: 0,
    pathMs: 0,
    waitMs: 0,
    weight: 1,
    promptTokens: 100,
    enqueuedAt: 0,
    ...overrides,
  };
}
