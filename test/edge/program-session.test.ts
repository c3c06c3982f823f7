import { listDurableObjectIds, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { programSession } from "../../src/edge/program/access";
import { CALL_REAP_GRACE_MS, D1_RETRY_MS } from "../../src/edge/program/session";
import { ProgramStore } from "../../src/edge/program/store";
import { edgeConfig } from "../../src/edge/env";
import type { SettleCallInput } from "../../src/edge/program/types";
import { Header } from "../../src/protocol/headers";
import {
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  gate,
  mockPool,
  newTenant,
  poolJson,
  limitsOf,
  programHeader,
  programRow,
  type TestTenant,
  tenantFetch,
  usageRows,
} from "./support";

const IDLE_TTL_MS = Number(env.PROGRAM_IDLE_TTL_MS);

afterEach(() => {
  vi.restoreAllMocks();
});

async function newProgram(tenant: TestTenant): Promise<string> {
  const res = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
  expect(res.status).toBe(201);
  return programHeader(res)!;
}

async function programState(tenant: TestTenant, programId: string) {
  return (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as {
    status: string;
    service_ms: number;
    path_ms: number;
    wait_ms: number;
    engine: string | null;
    in_flight: number;
    totals: { calls: number; prompt_tokens: number; completion_tokens: number };
    threads: { name: string; parent: string | null; in_flight: number; calls: number; service_ms: number }[];
  };
}

const settlement = (callId: string, overrides: Partial<SettleCallInput> = {}): SettleCallInput => ({
  callId,
  status: "ok",
  promptTokens: 10,
  cachedTokens: 0,
  completionTokens: 5,
  usageSource: "engine",
  serviceMs: 500,
  queueMs: 20,
  engine: "engine-x",
  finishedAt: Date.now(),
  ...overrides,
});

/** Moves the clock `ms` ahead for everything in this isolate (the Worker and its objects). */
function advanceClock(ms: number): void {
  const start = Date.now();
  vi.spyOn(Date, "now").mockReturnValue(start + ms);
}

describe("ProgramSession accounting", () => {
  it("gives ATLAS 5 s and PLAS 6 s for 2 s of history then parallel calls of 3 s and 1 s", async () => {
    const release = gate();
    const bothArrived = gate();
    let parallel = 0;
    const pool = mockPool(async ({ request }) => {
      const thread = request.headers.get(Header.thread);
      if (thread === "main") return poolJson({ stats: { engine: "eng-main", queueMs: 100, serviceMs: 2_000 } });
      parallel += 1;
      if (parallel === 2) bothArrived.open();
      await release.promise;
      return thread === "a"
        ? poolJson({ stats: { engine: "eng-a", queueMs: 30, serviceMs: 3_000 } })
        : poolJson({ stats: { engine: "eng-b", queueMs: 70, serviceMs: 1_000 } });
    });
    const tenant = await newTenant();
    const first = await chat(tenant);
    const programId = programHeader(first)!;
    await drain();

    const fork = (thread: string) =>
      chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: thread, [Header.parentThread]: "main" });
    const callA = fork("a");
    const callB = fork("b");
    await bothArrived.promise;

    const during = await programState(tenant, programId);
    expect(during.in_flight).toBe(2);
    expect(during.threads).toEqual([
      expect.objectContaining({ name: "main", in_flight: 0, calls: 1 }),
      expect.objectContaining({ name: "a", parent: "main", in_flight: 1, calls: 0 }),
      expect.objectContaining({ name: "b", parent: "main", in_flight: 1, calls: 0 }),
    ]);
    // Both parallel calls were sent with the program's values after the history.
    for (const forwarded of pool.slice(1)) {
      expect(forwarded.request.headers.get(Header.serviceMs)).toBe("2000");
      expect(forwarded.request.headers.get(Header.pathMs)).toBe("2000");
      expect(forwarded.request.headers.get(Header.waitMs)).toBe("100");
      expect(forwarded.request.headers.get(Header.engine)).toBe("eng-main");
    }

    release.open();
    expect((await callA).status).toBe(200);
    expect((await callB).status).toBe(200);
    await drain();

    const after = await programState(tenant, programId);
    expect(after.path_ms).toBe(5_000);
    expect(after.service_ms).toBe(6_000);
    expect(after.wait_ms).toBe(200);
    expect(after.in_flight).toBe(0);
    expect(["eng-a", "eng-b"]).toContain(after.engine);
    expect(after.totals.calls).toBe(3);
    expect(after.threads.map((t) => [t.name, t.calls, t.service_ms])).toEqual([
      ["main", 1, 2_000],
      ["a", 1, 3_000],
      ["b", 1, 1_000],
    ]);
  });

  it("settles a call once however often settle is repeated: one usage row, one count", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    const begun = await session.beginCall({ callId: "call_repeat1", thread: "main", model: "m", now: Date.now() });
    expect(begun).toMatchObject({ ok: true, serviceMs: 0, pathMs: 0, startValueMs: 0 });

    expect(await session.settleCall(settlement("call_repeat1"))).toEqual({ settled: true });
    expect(await session.settleCall(settlement("call_repeat1", { serviceMs: 9_999 }))).toEqual({
      settled: false,
      reason: "already_settled",
    });
    expect(await session.settleCall(settlement("call_never_begun"))).toEqual({ settled: false, reason: "unknown_call" });

    const rows = await usageRows(programId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ call_id: "call_repeat1", service_ms: 500, status: "ok", model: "m" });
    const state = await programState(tenant, programId);
    expect(state).toMatchObject({ service_ms: 500, path_ms: 500, totals: expect.objectContaining({ calls: 1 }) });
  });

  it("charges errored and cancelled calls for the service they used", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    await session.beginCall({ callId: "call_err", thread: "main", model: "m", now: Date.now() });
    await session.beginCall({ callId: "call_cancel", thread: "main", model: "m", now: Date.now() });
    await session.settleCall(settlement("call_err", { status: "error", serviceMs: 300, completionTokens: 0 }));
    await session.settleCall(settlement("call_cancel", { status: "cancelled", serviceMs: 200, completionTokens: 2 }));
    const state = await programState(tenant, programId);
    expect(state.service_ms).toBe(500);
    expect(state.totals).toMatchObject({ calls: 2, completion_tokens: 2 });
    expect((await usageRows(programId)).map((r) => r.status).sort()).toEqual(["cancelled", "error"]);
  });

  it("refuses bad settle figures instead of corrupting the accounting", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    await session.beginCall({ callId: "call_bad", thread: "main", model: "m", now: Date.now() });
    expect(await session.settleCall(settlement("call_bad", { serviceMs: Number.NaN }))).toMatchObject({
      settled: false,
      reason: "invalid_input",
      detail: expect.stringContaining("serviceMs"),
    });
    expect(await session.settleCall(settlement("call_bad", { promptTokens: -1 }))).toMatchObject({
      settled: false,
      reason: "invalid_input",
    });
    expect(await session.beginCall({ callId: "", thread: "main", model: "m", now: Date.now() })).toMatchObject({
      ok: false,
      error: "invalid_input",
    });
    expect(await programState(tenant, programId)).toMatchObject({ service_ms: 0, in_flight: 1 });
  });

  it("folds a call that settles after the program ended into the final summary", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    await session.beginCall({ callId: "call_late", thread: "main", model: "m", now: Date.now() });
    const ended = await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" });
    expect(await ended.json()).toMatchObject({ status: "ended", in_flight: 1 });
    expect(await programRow(programId)).toMatchObject({ status: "ended", calls: 0 });

    expect(await session.settleCall(settlement("call_late"))).toEqual({ settled: true });
    expect(await programRow(programId)).toMatchObject({ status: "ended", calls: 1, service_ms: 500, prompt_tokens: 10 });
    expect(await usageRows(programId)).toHaveLength(1);
    expect(await programState(tenant, programId)).toMatchObject({ status: "ended", in_flight: 0, threads: [] });
  });
});

describe("ProgramSession alarm", () => {
  it("keeps an active program alive until it has been idle for PROGRAM_IDLE_TTL_MS, then expires it", async () => {
    mockPool(() => poolJson({ usage: { prompt: 7, completion: 3 }, stats: { engine: "e1", queueMs: 1, serviceMs: 50 } }));
    const tenant = await newTenant();
    const first = await chat(tenant);
    const programId = programHeader(first)!;
    await drain();
    const session = programSession(env, tenant.id, programId);

    // Early: the alarm runs, finds the program still fresh, and re-arms itself.
    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect((await programState(tenant, programId)).status).toBe("active");

    advanceClock(IDLE_TTL_MS + 1_000);
    expect(await runDurableObjectAlarm(session)).toBe(true);
    const state = await programState(tenant, programId);
    expect(state).toMatchObject({ status: "expired", threads: [], totals: expect.objectContaining({ calls: 1 }) });
    expect(await programRow(programId)).toMatchObject({
      status: "expired",
      calls: 1,
      prompt_tokens: 7,
      completion_tokens: 3,
      service_ms: 50,
      ended_at: expect.any(Number),
    });
    // Nothing left to do: no alarm remains.
    expect(await runDurableObjectAlarm(session)).toBe(false);

    const late = await chat(tenant, chatBody(), { [Header.program]: programId });
    expect((await expectOpenAIError(late, 409)).error.code).toBe("program_expired");
  });

  it("reaps a call that was begun but never settled, then lets the program expire", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    // Admitted by its limiter (as every call the edge sends), then begun, then its edge vanishes.
    const admitted = await tenantLimiter(env, tenant.id).admitCall({ callId: "call_lost", now: Date.now(), limits: await limitsOf(tenant), promptTokens: 5 });
    expect(admitted.ok).toBe(true);
    await session.beginCall({ callId: "call_lost", thread: "main", model: "m", now: Date.now() });
    // And one begun alongside an admission that refused it, whose take-back was lost: no call at all.
    await session.beginCall({ callId: "call_never_admitted", thread: "main", model: "m", now: Date.now() });
    const CALL_LEASE_MS = edgeConfig(env).callTimeoutMs + CALL_REAP_GRACE_MS;

    // An in-flight call keeps an idle program from expiring until its lease runs out.
    advanceClock(IDLE_TTL_MS + 1_000);
    if (IDLE_TTL_MS + 1_000 < CALL_LEASE_MS) {
      expect(await runDurableObjectAlarm(session)).toBe(true);
      expect(await programState(tenant, programId)).toMatchObject({ status: "active", in_flight: 2 });
    }

    vi.restoreAllMocks();
    advanceClock(CALL_LEASE_MS + 1_000);
    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(await programState(tenant, programId)).toMatchObject({ status: "expired", in_flight: 0 });
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({ call_id: "call_lost", status: "error", service_ms: 0, prompt_tokens: 0, usage_source: "lost" }),
    ]);
    // Its edge turning up late changes nothing.
    expect(await session.settleCall(settlement("call_lost"))).toMatchObject({ settled: false });
    expect(await usageRows(programId)).toHaveLength(1);
  });

  it("moves the alarm only earlier: calls leave it, and an early alarm re-plans to the idle deadline", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    const alarm = () => runInDurableObject(session, (_instance, state) => state.storage.getAlarm());
    const created = (await alarm()) ?? 0;
    expect(created).toBeGreaterThan(0);

    const later = Date.now() + 60_000;
    await session.beginCall({ callId: "call_later", thread: "main", model: "m", now: later });
    await session.settleCall(settlement("call_later", { finishedAt: later }));
    expect(await alarm()).toBe(created);

    advanceClock(created - Date.now());
    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect((await programState(tenant, programId)).status).toBe("active");
    expect(await alarm()).toBe(later + IDLE_TTL_MS);
  });
});

describe("a program started by its first call", () => {
  it("is created by beginCall in one step; its D1 row goes with the first usage row", async () => {
    mockPool(() => poolJson({ usage: { prompt: 7, completion: 3 } }));
    const tenant = await newTenant();
    const res = await chat(tenant);
    const programId = programHeader(res)!;
    await drain();
    expect(await programRow(programId)).toMatchObject({ tenant_id: tenant.id, status: "active", calls: 1 });
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ program_id: programId, prompt_tokens: 7 })]);
  });

  it("reaches D1 through the alarm when no call settles", async () => {
    const tenant = await newTenant();
    const programId = "prog_NoSettleYet0000000001";
    const session = programSession(env, tenant.id, programId);
    const now = Date.now();
    const begun = await session.beginCall({
      newProgram: { tenantId: tenant.id, programId },
      callId: "call_unsettled",
      thread: "main",
      model: "m",
      now,
    });
    expect(begun).toMatchObject({ ok: true, serviceMs: 0, pathMs: 0, waitMs: 0, engine: "" });
    expect(await programRow(programId)).toBeNull();
    expect(await runInDurableObject(session, (_instance, state) => state.storage.getAlarm())).toBeLessThanOrEqual(
      Date.now() + D1_RETRY_MS,
    );

    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(await programRow(programId)).toMatchObject({ tenant_id: tenant.id, status: "active", calls: 0, created_at: now });
    expect(await programState(tenant, programId)).toMatchObject({ in_flight: 1 });
  });

  it("is not created when its first call is refused, and its active-program slot is given back", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const limiter = tenantLimiter(env, tenant.id);
    const activePrograms = async () =>
      (await limiter.peek({ now: Date.now(), limits: await limitsOf(tenant) })).activePrograms;
    const objectsBefore = new Set((await listDurableObjectIds(env.PROGRAM_SESSION)).map((id) => id.toString()));

    // A fork off a thread a brand-new program cannot have.
    const res = await chat(tenant, chatBody(), { [Header.thread]: "branch", [Header.parentThread]: "nope" });
    expect((await expectOpenAIError(res, 400)).error.code).toBe("unknown_parent_thread");
    expect(res.headers.get(Header.program)).toBeNull();
    await drain();
    expect(pool).toHaveLength(0);
    expect(await activePrograms()).toBe(0);
    // The object was reached, but its transaction rolled back: it holds no program.
    const reached = (await listDurableObjectIds(env.PROGRAM_SESSION)).filter((id) => !objectsBefore.has(id.toString()));
    expect(reached).toHaveLength(1);
    for (const id of reached) {
      const tables = await runInDurableObject(env.PROGRAM_SESSION.get(id), (_instance, state) =>
        state.storage.sql.exec("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'program'").toArray(),
      );
      expect(tables).toEqual([]);
    }
    const programs = await env.DB.prepare("SELECT COUNT(*) AS n FROM programs WHERE tenant_id = ?")
      .bind(tenant.id)
      .first<{ n: number }>();
    expect(programs?.n).toBe(0);

    // The same fork off main, which every new program has, goes through.
    const fork = await chat(tenant, chatBody(), { [Header.thread]: "branch", [Header.parentThread]: "main" });
    expect(fork.status).toBe(200);
    await drain();
    expect(await activePrograms()).toBe(1);
    const state = await programState(tenant, programHeader(fork)!);
    expect(state.threads.map((t) => [t.name, t.parent, t.calls])).toEqual([
      ["branch", "main", 1],
      ["main", null, 0],
    ]);
  });
});

describe("the program's pool", () => {
  it("is the pool whose engine served it last: begin answers it, a failover's settle moves it, an unanswered call does not", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    const begin = (callId: string, pool: string) => session.beginCall({ callId, thread: "main", model: "m", pool, now: Date.now() });

    expect(await begin("call_pool1", "us-1")).toMatchObject({ ok: true, pool: "", engine: "" });
    await session.settleCall(settlement("call_pool1", { engine: "us-engine" }));
    expect(await begin("call_pool2", "us-1")).toMatchObject({ ok: true, pool: "us-1", engine: "us-engine" });

    // us-1 failed before answering; eu-1 took the call: the program, and the call's usage row, say eu-1.
    await session.settleCall(settlement("call_pool2", { engine: "eu-engine", pool: "eu-1" }));
    expect(await begin("call_pool3", "eu-1")).toMatchObject({ ok: true, pool: "eu-1", engine: "eu-engine" });

    // A call no pool answered (no engine) leaves the program where it was.
    await session.settleCall(settlement("call_pool3", { status: "error", engine: "", pool: "us-1", usageSource: "none", promptTokens: 0, completionTokens: 0 }));
    expect(await begin("call_pool4", "eu-1")).toMatchObject({ ok: true, pool: "eu-1", engine: "eu-engine" });

    const rows = await usageRows(programId);
    expect(Object.fromEntries(rows.map((row) => [row.call_id, row.pool]))).toEqual({ call_pool1: "us-1", call_pool2: "eu-1", call_pool3: "us-1" });
  });

  it("an object created before programs had a pool gains the column and keeps its program", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    const meta = await runInDurableObject(session, (_instance, state) => {
      state.storage.sql.exec("ALTER TABLE program DROP COLUMN pool");
      const store = new ProgramStore(state.storage.sql);
      store.upgrade();
      return store.readMeta();
    });
    expect(meta).toMatchObject({ programId, pool: "", status: "active" });
  });

  it("an object created before ledger shards gains the column: one shard, its tenant's one ledger object", async () => {
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const session = programSession(env, tenant.id, programId);
    const meta = await runInDurableObject(session, (_instance, state) => {
      state.storage.sql.exec("ALTER TABLE program DROP COLUMN ledger_shards");
      const store = new ProgramStore(state.storage.sql);
      store.upgrade();
      return store.readMeta();
    });
    expect(meta).toMatchObject({ programId, ledgerShards: 1, status: "active" });
  });
});
