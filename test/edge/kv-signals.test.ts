import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import { verifyForward } from "../../src/protocol/signing";
import { CALL_ROUTE, chat, chatBody, drain, mockPool, newTenant, POOL_CHAT_URL, POOL_KEYS, poolJson, programHeader, type TestTenant } from "./support";

/*
 * The edge's branch-aware retention signals (issue 13): each call carries its thread's
 * context generation, signed, so the pool can drop a context the program replaced.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const message = (role: string, content: string) => ({ role, content });
const SYSTEM = message("system", "You are a coding agent.");
const TASK = message("user", "Fix the failing test.");

/** Sends one call of `programId` (a new program when undefined) on `thread`; returns its program. */
async function call(tenant: TestTenant, messages: object[], programId?: string, thread: Record<string, string> = {}): Promise<string> {
  const res = await chat(tenant, chatBody({ messages }), { ...(programId ? { [Header.program]: programId } : {}), ...thread });
  expect(res.status).toBe(200);
  await res.text();
  await drain();
  return programHeader(res)!;
}

describe("context generation on forwarded calls", () => {
  it("a normal next turn keeps the generation, a compacted history starts the next, and the pool can verify it", async () => {
    const seen = mockPool(() => poolJson());
    const tenant = await newTenant();
    const first = [SYSTEM, TASK];
    const programId = await call(tenant, first);
    const second = [...first, message("assistant", "Hello!"), message("user", "And the lint?")];
    await call(tenant, second, programId);
    await call(tenant, [SYSTEM, message("user", "Summary: the test passes, the lint is next.")], programId);
    const calls = seen.filter((f) => f.request.url === POOL_CHAT_URL);
    expect(calls.map((f) => f.request.headers.get(Header.contextGeneration))).toEqual(["0", "0", "1"]);
    const verified = await verifyForward(POOL_KEYS, CALL_ROUTE, calls[2]!.request.headers, calls[2]!.body, { now: Date.now(), windowMs: 30_000 });
    expect(verified).toMatchObject({ ok: true, fields: { program: programId, generation: 1 } });
  });

  it("threads are independent, and a fork starts at its parent's context", async () => {
    const seen = mockPool(() => poolJson());
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    await call(tenant, [SYSTEM, message("user", "Summary.")], programId);
    // A fork of main that continues main's compacted conversation stays at main's generation ...
    const fork = { [Header.thread]: "branch-a", [Header.parentThread]: "main" };
    await call(tenant, [SYSTEM, message("user", "Summary."), message("assistant", "Hello!"), message("user", "Try A.")], programId, fork);
    // ... and another thread's first call starts at 0, whatever main did.
    await call(tenant, [SYSTEM, message("user", "Review.")], programId, { [Header.thread]: "reviewer" });
    const generations = seen
      .filter((f) => f.request.url === POOL_CHAT_URL)
      .map((f) => [f.request.headers.get(Header.thread), f.request.headers.get(Header.contextGeneration)]);
    expect(generations).toEqual([
      ["main", "0"],
      ["main", "1"],
      ["branch-a", "1"],
      ["reviewer", "0"],
    ]);
  });
});
