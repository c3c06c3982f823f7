import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { programSession } from "../../src/edge/program/access";
import { Header } from "../../src/protocol/headers";
import { KvHintBatch } from "../../src/protocol/kv-hints";
import { POOL_PATHS, verifyForward } from "../../src/protocol/signing";
import {
  CALL_ROUTE,
  chat,
  chatBody,
  drain,
  mockPool,
  newTenant,
  POOL_CHAT_URL,
  POOL_KEYS,
  poolJson,
  programHeader,
  type TestTenant,
  tenantFetch,
} from "./support";

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
    // The program's view shows it too (kept in the object's SQLite).
    const view = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { threads: { name: string; context_generation: number }[] };
    expect(view.threads).toMatchObject([{ name: "main", context_generation: 1 }]);
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

describe("program end → signed KV hint to its pool", () => {
  const POOL_KV_HINTS_URL = "http://pool.test/v1/kv-hints";
  const KV_HINTS_ROUTE = { method: "POST", path: POOL_PATHS.kvHints };

  it("DELETE of a program sends its pool one signed program_ended hint, after the answer, and a second DELETE sends none", async () => {
    const seen = mockPool((forwarded) => (forwarded.request.url === POOL_KV_HINTS_URL ? Response.json({ accepted: 1 }, { status: 202 }) : poolJson()));
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    const res = await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" });
    expect(res.status).toBe(200);
    await drain();
    await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" });
    await drain();
    const hints = seen.filter((f) => f.request.url === POOL_KV_HINTS_URL);
    expect(hints).toHaveLength(1);
    const [hint] = hints;
    const verified = await verifyForward(POOL_KEYS, KV_HINTS_ROUTE, hint!.request.headers, hint!.body, { now: Date.now(), windowMs: 30_000 });
    expect(verified).toMatchObject({ ok: true, fields: { tenant: tenant.id, program: programId } });
    expect(KvHintBatch.parse(JSON.parse(new TextDecoder().decode(hint!.body)))).toEqual({ hints: [{ type: "program_ended", reason: "ended" }] });
  });

  it("a pool that fails the hint does not fail the DELETE, and a program no engine served sends none", async () => {
    const seen = mockPool((forwarded) => (forwarded.request.url === POOL_KV_HINTS_URL ? new Response("down", { status: 503 }) : poolJson()));
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    expect((await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" })).status).toBe(200);
    await drain();
    expect(seen.filter((f) => f.request.url === POOL_KV_HINTS_URL)).toHaveLength(1);

    const created = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    const unserved = programHeader(created)!;
    expect((await tenantFetch(tenant, `/v1/programs/${unserved}`, { method: "DELETE" })).status).toBe(200);
    await drain();
    expect(seen.filter((f) => f.request.url === POOL_KV_HINTS_URL)).toHaveLength(1);
  });

  it("a program that expires idle sends its pool a program_ended hint with reason expired", async () => {
    const seen = mockPool((forwarded) => (forwarded.request.url === POOL_KV_HINTS_URL ? Response.json({ accepted: 1 }, { status: 202 }) : poolJson()));
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    const start = Date.now();
    vi.spyOn(Date, "now").mockReturnValue(start + Number(env.PROGRAM_IDLE_TTL_MS) + 1_000);
    expect(await runDurableObjectAlarm(programSession(env, tenant.id, programId))).toBe(true);
    const hints = seen.filter((f) => f.request.url === POOL_KV_HINTS_URL);
    expect(hints).toHaveLength(1);
    expect(hints[0]!.request.headers.get(Header.program)).toBe(programId);
    expect(JSON.parse(new TextDecoder().decode(hints[0]!.body))).toEqual({ hints: [{ type: "program_ended", reason: "expired" }] });
  });
});
