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
  expectOpenAIError,
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

describe("thread end → signed thread_ended hint to the pools that served it", () => {
  const POOL_KV_HINTS_URL = "http://pool.test/v1/kv-hints";
  const KV_HINTS_ROUTE = { method: "POST", path: POOL_PATHS.kvHints };
  const FORK = { [Header.thread]: "branch-a", [Header.parentThread]: "main" };
  const endThread = (tenant: TestTenant, programId: string, thread: string, body?: string) =>
    tenantFetch(tenant, `/v1/programs/${programId}/threads/${thread}`, { method: "DELETE", ...(body === undefined ? {} : { body }) });
  const hintPool = () => mockPool((forwarded) => (forwarded.request.url === POOL_KV_HINTS_URL ? Response.json({ accepted: 1 }, { status: 202 }) : poolJson()));

  /** A program whose main thread and fork branch-a each had a call. */
  async function programWithFork(tenant: TestTenant): Promise<string> {
    const programId = await call(tenant, [SYSTEM, TASK]);
    await call(tenant, [SYSTEM, TASK, message("assistant", "Hello!"), message("user", "Try A.")], programId, FORK);
    return programId;
  }

  it("DELETE of a thread marks it ended with its outcome and sends its pool one signed thread_ended hint; a repeat sends none", async () => {
    const seen = hintPool();
    const tenant = await newTenant();
    const programId = await programWithFork(tenant);
    const res = await endThread(tenant, programId, "branch-a", JSON.stringify({ outcome: "merged" }));
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.program)).toBe(programId);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ object: "program.thread", program_id: programId, name: "branch-a", parent: "main", calls: 1, outcome: "merged" });
    expect(typeof body.ended_at).toBe("number");
    await drain();
    // Idempotent: the first end stands (outcome included), and nothing more is sent.
    const again = await endThread(tenant, programId, "branch-a");
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ outcome: "merged", ended_at: body.ended_at });
    await drain();
    const hints = seen.filter((f) => f.request.url === POOL_KV_HINTS_URL);
    expect(hints).toHaveLength(1);
    const verified = await verifyForward(POOL_KEYS, KV_HINTS_ROUTE, hints[0]!.request.headers, hints[0]!.body, { now: Date.now(), windowMs: 30_000 });
    expect(verified).toMatchObject({ ok: true, fields: { tenant: tenant.id, program: programId } });
    expect(KvHintBatch.parse(JSON.parse(new TextDecoder().decode(hints[0]!.body)))).toEqual({
      hints: [{ type: "thread_ended", thread: "branch-a", generation: 0, outcome: "merged" }],
    });
    // The program goes on: main is open, the fork shows its end.
    const view = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { status: string; threads: object[] };
    expect(view.status).toBe("active");
    expect(view.threads).toMatchObject([
      { name: "main", ended_at: null, outcome: null },
      { name: "branch-a", outcome: "merged" },
    ]);
  });

  it("an empty body ends a thread as abandoned; a later call on it reopens it at the next context generation", async () => {
    const seen = hintPool();
    const tenant = await newTenant();
    const programId = await programWithFork(tenant);
    expect(await (await endThread(tenant, programId, "branch-a")).json()).toMatchObject({ outcome: "abandoned", context_generation: 0 });
    await drain();
    // Its old context was dropped where it was held: the reopened thread's KV must not carry that context's tag.
    await call(tenant, [SYSTEM, TASK, message("assistant", "Hello!"), message("user", "Try A."), message("assistant", "Done."), message("user", "Again.")], programId, FORK);
    const calls = seen.filter((f) => f.request.url === POOL_CHAT_URL && f.request.headers.get(Header.thread) === "branch-a");
    expect(calls.map((f) => f.request.headers.get(Header.contextGeneration))).toEqual(["0", "1"]);
    const view = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { threads: object[] };
    expect(view.threads).toMatchObject([{ name: "main" }, { name: "branch-a", ended_at: null, outcome: null, context_generation: 1 }]);
    // Ended again, the hint names the reopened generation.
    await endThread(tenant, programId, "branch-a");
    await drain();
    const hints = seen.filter((f) => f.request.url === POOL_KV_HINTS_URL).map((f) => JSON.parse(new TextDecoder().decode(f.body)));
    expect(hints).toEqual([
      { hints: [{ type: "thread_ended", thread: "branch-a", generation: 0, outcome: "abandoned" }] },
      { hints: [{ type: "thread_ended", thread: "branch-a", generation: 1, outcome: "abandoned" }] },
    ]);
  });

  it("another tenant's program is 404 exactly like an unknown one, and nothing is ended or sent", async () => {
    const seen = hintPool();
    const owner = await newTenant();
    const stranger = await newTenant();
    const programId = await programWithFork(owner);
    const unknownId = "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ";
    const foreign = await endThread(stranger, programId, "branch-a");
    const unknown = await endThread(stranger, unknownId, "branch-a");
    expect(foreign.status).toBe(404);
    const foreignBody = await foreign.text();
    expect(foreignBody).toBe((await unknown.text()).replaceAll(unknownId, programId));
    expect(JSON.parse(foreignBody)).toMatchObject({ error: { code: "program_not_found" } });
    await drain();
    expect(seen.filter((f) => f.request.url === POOL_KV_HINTS_URL)).toHaveLength(0);
    const view = (await (await tenantFetch(owner, `/v1/programs/${programId}`)).json()) as { threads: object[] };
    expect(view.threads).toMatchObject([{ name: "main" }, { name: "branch-a", ended_at: null }]);
  });

  it("refuses a bad body, a bad or unknown thread, and an ended program, with OpenAI's error shape", async () => {
    hintPool();
    const tenant = await newTenant();
    const programId = await programWithFork(tenant);
    const bad = await expectOpenAIError(await endThread(tenant, programId, "branch-a", JSON.stringify({ outcome: "paused" })), 400, "invalid_request_error");
    expect(bad.error).toMatchObject({ code: "invalid_request", param: "outcome" });
    const extra = await expectOpenAIError(await endThread(tenant, programId, "branch-a", JSON.stringify({ reason: "done" })), 400);
    expect(extra.error.code).toBe("invalid_request");
    expect((await expectOpenAIError(await endThread(tenant, programId, "branch-a", "{not json"), 400)).error.code).toBe("invalid_json");
    expect((await expectOpenAIError(await endThread(tenant, programId, "has%20space"), 400)).error.code).toBe("invalid_thread");
    const unknown = await expectOpenAIError(await endThread(tenant, programId, "nobody"), 404);
    expect(unknown.error).toMatchObject({ code: "thread_not_found", param: "thread" });
    // None of those ended the thread.
    const view = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { threads: object[] };
    expect(view.threads).toMatchObject([{ name: "main" }, { name: "branch-a", ended_at: null }]);
    expect((await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" })).status).toBe(200);
    expect((await expectOpenAIError(await endThread(tenant, programId, "main"), 409)).error.code).toBe("program_ended");
  });

  it("a thread no engine served sends no hint", async () => {
    const seen = hintPool();
    const tenant = await newTenant();
    const programId = programHeader(await tenantFetch(tenant, "/v1/programs", { method: "POST" }))!;
    expect((await endThread(tenant, programId, "main")).status).toBe(200);
    await drain();
    expect(seen.filter((f) => f.request.url === POOL_KV_HINTS_URL)).toHaveLength(0);
  });
});

describe("a fork merged back into its thread → thread_ended (merged), after the merging call completed", () => {
  const POOL_KV_HINTS_URL = "http://pool.test/v1/kv-hints";
  const FORK = { [Header.thread]: "branch-a", [Header.parentThread]: "main" };
  const FORK_A = [SYSTEM, TASK, message("assistant", "Hello!"), message("user", "Try A.")];
  const hintBodies = (seen: { request: Request; body: ArrayBuffer }[]) =>
    seen.filter((f) => f.request.url === POOL_KV_HINTS_URL).map((f) => JSON.parse(new TextDecoder().decode(f.body)) as unknown);
  const threadsOf = async (tenant: TestTenant, programId: string) =>
    ((await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { threads: object[] }).threads;

  it("a call on main that contains the fork's whole last call ends the fork as merged and tells its pool, once", async () => {
    const seen = mockPool((forwarded) => (forwarded.request.url === POOL_KV_HINTS_URL ? Response.json({ accepted: 1 }, { status: 202 }) : poolJson()));
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    await call(tenant, FORK_A, programId, FORK);
    expect(hintBodies(seen)).toEqual([]);
    const merging = [...FORK_A, message("assistant", "A works."), message("user", "Good: go on with A.")];
    await call(tenant, merging, programId);
    expect(hintBodies(seen)).toEqual([{ hints: [{ type: "thread_ended", thread: "branch-a", generation: 0, outcome: "merged" }] }]);
    expect(await threadsOf(tenant, programId)).toMatchObject([
      { name: "main", ended_at: null },
      { name: "branch-a", outcome: "merged" },
    ]);
    // main's next turn extends the fork's context too, but the fork is ended: nothing more is sent.
    await call(tenant, [...merging, message("assistant", "On it."), message("user", "And the lint?")], programId);
    expect(hintBodies(seen)).toHaveLength(1);
  });

  it("main's own next turn that does not contain the fork's work, and a merging call that failed, end nothing", async () => {
    let failNext = false;
    const seen = mockPool((forwarded) => {
      if (forwarded.request.url === POOL_KV_HINTS_URL) return Response.json({ accepted: 1 }, { status: 202 });
      if (failNext) return Response.json({ error: { message: "bad", type: "invalid_request_error", code: null, param: null } }, { status: 400 });
      return poolJson();
    });
    const tenant = await newTenant();
    const programId = await call(tenant, [SYSTEM, TASK]);
    await call(tenant, FORK_A, programId, FORK);
    await call(tenant, [SYSTEM, TASK, message("assistant", "Hello!"), message("user", "Try B.")], programId);
    failNext = true;
    const res = await chat(tenant, chatBody({ messages: [...FORK_A, message("assistant", "A works.")] }), { [Header.program]: programId });
    expect(res.status).toBe(400);
    await res.text();
    await drain();
    expect(hintBodies(seen)).toEqual([]);
    expect(await threadsOf(tenant, programId)).toMatchObject([{ name: "main" }, { name: "branch-a", ended_at: null, outcome: null }]);
  });
});
