import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Env } from "../../src/edge/env";
import { ledgerShard, usageLedger } from "../../src/edge/ledger/access";
import { ledgerShardOf } from "../../src/edge/ledger/shards";
import { writeProgramSummary } from "../../src/edge/db/ledger";
import { LEDGER_RETRY_FIRST_MS, programHandOffWaitMs, QUARANTINE_RETRY_MS } from "../../src/edge/ledger/flush-schedule";
import type { LedgerProgramSummary, LedgerUsageRow } from "../../src/edge/ledger/types";
import { programSession } from "../../src/edge/program/access";
import type { ProgramStore } from "../../src/edge/program/store";
import { database } from "../../src/edge/db/client";
import {
  adminFetch,
  frozenClock,
  mockPool,
  newLimitedTenant,
  newTenant,
  chat,
  drain,
  poolJson,
  programHeader,
  programRow,
  programWithSettledCalls,
  settlement,
  tenantFetch,
  tenantUsageRows,
  type TestTenant,
  unreachableD1,
  usageRows,
} from "./support";

/*
 * The tenant's UsageLedger: its programs hand it their pending rows together from their
 * alarm (half of LEDGER_FLUSH_MS after the oldest one's settle), and it takes every
 * program's rows to D1 in one batch within LEDGER_FLUSH_MS of that settle. The test config
 * writes rows at each settle (LEDGER_FLUSH_MS 0); here the ledger (and the programs) get batching on.
 */

const FLUSH_MS = 5_000;

afterEach(() => {
  vi.restoreAllMocks();
});

type Ledger = ReturnType<typeof usageLedger>;
type Session = ReturnType<typeof programSession>;
type BatchSpy = { batch: (...args: unknown[]) => Promise<unknown> };

/** Turns batching on in this object (its env is what it reads LEDGER_FLUSH_MS from). */
async function batching(stub: Ledger | Session, over: Partial<Env> = {}): Promise<void> {
  await runInDurableObject(stub, (instance: object) => {
    Reflect.set(instance, "env", { ...env, LEDGER_FLUSH_MS: String(FLUSH_MS), ...over });
  });
}

/** D1 stops answering this ledger (an outage: every query fails, a probe too); the answer brings it back. */
async function outage(ledger: Ledger): Promise<() => Promise<void>> {
  const real: unknown = await runInDurableObject(ledger, (instance: object) => {
    const db: unknown = Reflect.get(instance, "db");
    Reflect.set(instance, "db", database(unreachableD1()));
    return db;
  });
  return () => runInDurableObject(ledger, (instance: object) => void Reflect.set(instance, "db", real));
}

/** A spy on the ledger's D1 batches (every write it makes goes through one). */
const batches = (ledger: Ledger) =>
  runInDurableObject(ledger, (instance: object) => vi.spyOn(Reflect.get(instance, "db") as BatchSpy, "batch"));

const alarmOf = (stub: Ledger | Session) => runInDurableObject(stub, (_instance: object, state) => state.storage.getAlarm());

/** The settled rows a program still holds for its ledger (not yet acknowledged). */
const heldByProgram = (session: Session) =>
  runInDurableObject(session, (instance) => (Reflect.get(instance, "store") as ProgramStore).unrecordedCalls().map((call) => call.callId));

const newProgramId = () => `prog_Ledger${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;

/** A tenant whose ledger batches, with `programs` programs of `calls` settled calls each, handed off by each program's alarm. */
async function tenantWithPrograms(programs: number, calls: number) {
  const tenant = await newTenant();
  const ledger = usageLedger(env, tenant.id);
  await batching(ledger);
  const made = [];
  for (let i = 0; i < programs; i++) {
    const program = await programWithSettledCalls(tenant.id, calls, (session) => batching(session));
    expect(await runDurableObjectAlarm(program.session)).toBe(true);
    made.push(program);
  }
  return { tenant, ledger, programs: made };
}

/** A USAGE_LEDGER that records the rows each hand-off carries (the real ledger behind it answers). */
function countedLedgers(): { ledgers: Env["USAGE_LEDGER"]; handOffs: string[][] } {
  const handOffs: string[][] = [];
  const ledgers = new Proxy(env.USAGE_LEDGER, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (prop !== "get" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
      return (id: DurableObjectId) => {
        const stub = target.get(id);
        return {
          handOff: (input: Parameters<typeof stub.handOff>[0]) => {
            handOffs.push(input.rows.map((r) => r.callId));
            return stub.handOff(input);
          },
        };
      };
    },
  }) as unknown as Env["USAGE_LEDGER"];
  return { ledgers, handOffs };
}

function row(tenantId: string, programId: string, callId: string, over: Partial<LedgerUsageRow> = {}): LedgerUsageRow {
  const now = Date.now();
  return {
    callId,
    tenantId,
    programId,
    thread: "main",
    model: "m",
    engine: "e1",
    promptTokens: 10,
    cachedTokens: 0,
    completionTokens: 5,
    serviceMs: 100,
    queueMs: 3,
    status: "ok",
    startedAt: now - 100,
    finishedAt: now,
    pool: "pool-test",
    usageSource: "engine",
    api: "chat.completions",
    ...over,
  };
}

function summary(tenantId: string, programId: string, over: Partial<LedgerProgramSummary> = {}): LedgerProgramSummary {
  return {
    id: programId,
    tenantId,
    status: "active",
    createdAt: Date.now() - 1_000,
    endedAt: null,
    calls: 1,
    promptTokens: 10,
    cachedTokens: 0,
    completionTokens: 5,
    serviceMs: 100,
    pathMs: 100,
    waitMs: 3,
    ...over,
  };
}

/** A usage row of a program D1 has no row for (usage.program_id references programs.id): D1 refuses it. */
function orphanRow(tenantId: string): LedgerUsageRow {
  const programId = newProgramId();
  return row(tenantId, programId, `call_orphan_${programId.slice(-10)}`);
}

describe("the tenant's usage ledger", () => {
  it("takes the rows of many programs of one tenant to D1 in one batch within LEDGER_FLUSH_MS", async () => {
    // 12 programs × 2 calls: 24 rows and 12 program rows, several multi-row statements, one batch.
    const { tenant, ledger, programs } = await tenantWithPrograms(12, 2);
    const started = Math.min(...programs.map((p) => p.started));
    // Handed off by the programs' alarms: the programs hold nothing, the ledger everything, D1 nothing yet.
    for (const { session } of programs) expect(await heldByProgram(session)).toEqual([]);
    expect(await ledger.pendingCounts()).toEqual({ rows: 24, summaries: 12 });
    expect(await tenantUsageRows(tenant.id)).toEqual([]);
    expect(await programRow(programs[0]!.programId)).toBeNull();
    const due = await alarmOf(ledger);
    expect(due).not.toBeNull();
    expect(due!).toBeLessThanOrEqual(started + FLUSH_MS);

    const spy = await batches(ledger);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(24);
    expect(new Set(rows.map((r) => r.call_id))).toEqual(new Set(programs.flatMap((p) => p.callIds)));
    for (const r of rows) expect(r).toMatchObject({ prompt_tokens: 10, cached_tokens: 2, completion_tokens: 5, status: "ok", engine: "e1" });
    // A program's row goes with its rows' hand-off (created here; both calls in it), not at every settle.
    for (const { programId } of programs) {
      expect(await programRow(programId)).toMatchObject({ status: "active", calls: 2, prompt_tokens: 20 });
    }
    // Nothing left: no alarm.
    expect(await alarmOf(ledger)).toBeNull();
  });

  it("keeps every row through a D1 outage, quarantining none, and writes each exactly once on the retry, with backoff", async () => {
    const { tenant, ledger, programs } = await tenantWithPrograms(3, 2);
    const settledBy = Math.min(...programs.map((p) => p.started));
    const restore = await outage(ledger);
    const failedAt = Date.now();
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await tenantUsageRows(tenant.id)).toEqual([]);
    // D1 answered nothing (not even the probe): an outage, not a refusal. Everything waits; nothing is quarantined.
    expect(await ledger.pendingCounts()).toEqual({ rows: 6, summaries: 3 });
    expect((await ledger.status()).quarantined).toEqual({ rows: { count: 0, since: null }, summaries: { count: 0, since: null } });
    // The report says the figures are older than the usual bound: not before the oldest row still waiting.
    const report = (await (await tenantFetch(tenant, "/v1/usage")).json()) as { data_as_of: string; ledger_quarantined_rows: number };
    expect(Date.parse(report.data_as_of)).toBeLessThanOrEqual(settledBy);
    expect(report.ledger_quarantined_rows).toBe(0);
    // The retry is armed after the first backoff, not at the full flush delay.
    const retry = await alarmOf(ledger);
    expect(retry).not.toBeNull();
    expect(retry!).toBeGreaterThanOrEqual(failedAt + LEDGER_RETRY_FIRST_MS);
    expect(retry!).toBeLessThan(Date.now() + LEDGER_RETRY_FIRST_MS + 1_000);

    await restore();
    const spy = await batches(ledger);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(6);
    expect((await ledger.status()).quarantined.rows.count).toBe(0);
    // A program handing the same calls over again (an acknowledgement it lost) adds nothing.
    const again = programs[0]!;
    const settled = await runInDurableObject(again.session, (instance) =>
      (Reflect.get(instance, "store") as ProgramStore).call(again.callIds[0]!),
    );
    expect(settled?.status).toBe("ok");
    await ledger.handOff({
      programs: [],
      rows: [row(tenant.id, again.programId, again.callIds[0]!, { promptTokens: 999 })],
    });
    await runDurableObjectAlarm(ledger);
    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(6);
    expect(rows.map((r) => r.prompt_tokens)).toEqual([10, 10, 10, 10, 10, 10]);
  });

  it("counts a call ID handed over twice once, before and after its batch, and never takes a program row back", async () => {
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    await batching(ledger);
    const programId = newProgramId();
    const first = row(tenant.id, programId, `call_twice_${programId.slice(-8)}`);
    const newer = summary(tenant.id, programId, { calls: 2, promptTokens: 20 });
    expect(await ledger.handOff({ programs: [newer], rows: [first] })).toEqual({ ok: true });
    // The same call again, and a summary from before (a hand-off that arrived late).
    expect(await ledger.handOff({ programs: [summary(tenant.id, programId)], rows: [first] })).toEqual({ ok: true });
    expect(await ledger.pendingCounts()).toEqual({ rows: 1, summaries: 1 });
    await runDurableObjectAlarm(ledger);
    expect(await usageRows(programId)).toHaveLength(1);
    expect(await programRow(programId)).toMatchObject({ calls: 2, prompt_tokens: 20 });

    // After the batch: the same call with other figures, and the old summary, change nothing in D1.
    await ledger.handOff({ programs: [summary(tenant.id, programId)], rows: [{ ...first, promptTokens: 999 }] });
    await runDurableObjectAlarm(ledger);
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ call_id: first.callId, prompt_tokens: 10 })]);
    expect(await programRow(programId)).toMatchObject({ calls: 2, prompt_tokens: 20 });
    // An ended summary with as many calls does replace it.
    await ledger.handOff({ programs: [summary(tenant.id, programId, { calls: 2, promptTokens: 20, status: "ended", endedAt: Date.now() })], rows: [] });
    await runDurableObjectAlarm(ledger);
    expect(await programRow(programId)).toMatchObject({ calls: 2, status: "ended" });
  });

  it("sends a large backlog over several alarms, each within D1's per-invocation limits, every row once", async () => {
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    await batching(ledger);
    const programId = newProgramId();
    const total = 3_000;
    for (let part = 0; part < total / 500; part++) {
      const rows = Array.from({ length: 500 }, (_, i) => row(tenant.id, programId, `call_backlog_${part}_${i}_${programId.slice(-6)}`));
      expect(await ledger.handOff({ programs: part === 0 ? [summary(tenant.id, programId)] : [], rows })).toEqual({ ok: true });
    }
    const spy = await batches(ledger);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    // 10 batches of at most 50 statements (the program row, then 5 usage rows a statement), read
    // 1,000 rows at a time (999 rows in 5 batches, 1,000 in 4, 250 in 1); the rest keeps its due time
    // (LEDGER_FLUSH_MS after its settle: at once for a backlog already overdue).
    expect(spy).toHaveBeenCalledTimes(10);
    expect(await usageRows(programId)).toHaveLength(2_249);
    expect(await alarmOf(ledger)).toBeLessThanOrEqual(Date.now() + FLUSH_MS);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await usageRows(programId)).toHaveLength(total);
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
  });

  it("leaves rows handed over during a batch for the next one, rather than chasing each arrival with a D1 query", async () => {
    const { tenant, ledger, programs } = await tenantWithPrograms(2, 1);
    const late = row(tenant.id, programs[0]!.programId, `call_late_${programs[0]!.programId.slice(-8)}`);
    const spy = await runInDurableObject(ledger, (instance: object) => {
      const db = Reflect.get(instance, "db") as BatchSpy;
      const original = db.batch.bind(db);
      const handOff = Reflect.get(instance, "handOff") as (input: unknown) => Promise<unknown>;
      // A program's hand-off lands while D1 is writing the batch.
      return vi.spyOn(db, "batch").mockImplementationOnce(async (...args: unknown[]) => {
        await handOff.call(instance, { programs: [], rows: [late] });
        return original(...args);
      });
    });
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(2);
    expect(await ledger.pendingCounts()).toEqual({ rows: 1, summaries: 0 });
    expect(await alarmOf(ledger)).not.toBeNull();
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(3);
  });

  it("refuses a malformed hand-off whole, storing nothing", async () => {
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    const programId = newProgramId();
    const bad = { ...row(tenant.id, programId, "call_bad"), promptTokens: Number.NaN };
    const result = await ledger.handOff({ programs: [summary(tenant.id, programId)], rows: [row(tenant.id, programId, "call_good"), bad] });
    expect(result).toMatchObject({ ok: false, error: "invalid_input" });
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
  });

  it("loses nothing when the ledger restarts between the hand-off and its batch", async () => {
    const { tenant, ledger: before, programs } = await tenantWithPrograms(2, 2);
    // The object is thrown away (as an eviction or a crash would): only its storage remains.
    await expect(runInDurableObject(before, (_instance: object, state) => state.abort("restart"))).rejects.toThrow();
    const ledger = usageLedger(env, tenant.id);
    expect(await ledger.pendingCounts()).toEqual({ rows: 4, summaries: 2 });
    expect(await tenantUsageRows(tenant.id)).toEqual([]);

    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    const rows = await tenantUsageRows(tenant.id);
    expect(rows.map((r) => r.call_id).sort()).toEqual(programs.flatMap((p) => p.callIds).sort());
    await runDurableObjectAlarm(ledger);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(4);
  });
});

describe("rows D1 refuses (quarantine)", () => {
  type Report = { data_as_of: string; ledger_quarantined_rows: number; ledger_quarantined_since: string | null };
  const usageReport = async (tenant: TestTenant) => (await (await tenantFetch(tenant, "/v1/usage")).json()) as Report;
  const exportReport = async () =>
    (await (await adminFetch(`/admin/usage/export?period=${new Date(Date.now()).toISOString().slice(0, 7)}`)).json()) as Report;

  it("quarantines a row whose program row is missing; the tenant's other rows still reach D1; counted once, reported, written once when its program row exists", async () => {
    const clock = frozenClock();
    const { tenant, ledger, programs } = await tenantWithPrograms(3, 2);
    const orphan = orphanRow(tenant.id);
    // In the same batch as the 6 good rows and their 3 program rows.
    expect(await ledger.handOff({ programs: [], rows: [orphan] })).toEqual({ ok: true });
    const errors = vi.spyOn(console, "error");
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect((await tenantUsageRows(tenant.id)).map((r) => r.call_id).sort()).toEqual(programs.flatMap((p) => p.callIds).sort());
    expect(await usageRows(orphan.programId)).toEqual([]);
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
    const quarantinedAt = clock.now();
    expect((await ledger.status()).quarantined).toEqual({ rows: { count: 1, since: quarantinedAt }, summaries: { count: 0, since: null } });
    // Logged with D1's own error.
    expect(errors.mock.calls.some(([message, error]) => String(message).includes(orphan.callId) && String(error).includes("FOREIGN KEY"))).toBe(true);
    // Tried again in 10 minutes.
    expect(await alarmOf(ledger)).toBe(quarantinedAt + QUARANTINE_RETRY_MS);

    // Reported: GET /v1/usage, the export, and the operator's view with D1's error.
    clock.advance(1_000);
    expect(await usageReport(tenant)).toMatchObject({ ledger_quarantined_rows: 1, ledger_quarantined_since: new Date(quarantinedAt).toISOString() });
    const exported = await exportReport();
    expect(exported.ledger_quarantined_rows).toBeGreaterThanOrEqual(1);
    expect(Date.parse(exported.ledger_quarantined_since!)).toBeLessThanOrEqual(quarantinedAt);
    const view = (await (await adminFetch(`/admin/tenants/${tenant.id}/ledger`)).json()) as {
      shards: { shard: number; quarantined_rows: number }[];
      quarantined: { kind: string; id: string; program_id: string; attempts: number; last_error: string }[];
    };
    expect(view.shards).toEqual([expect.objectContaining({ shard: 0, quarantined_rows: 1 })]);
    expect(view.quarantined).toEqual([
      expect.objectContaining({ kind: "usage", id: orphan.callId, program_id: orphan.programId, attempts: 1, last_error: expect.stringContaining("FOREIGN KEY") }),
    ]);

    // The tenant's next rows keep flowing; the refused one handed over again stays quarantined, counted once.
    const more = row(tenant.id, programs[0]!.programId, `call_more_${programs[0]!.programId.slice(-8)}`);
    await ledger.handOff({ programs: [], rows: [orphan, more] });
    expect(await ledger.pendingCounts()).toEqual({ rows: 1, summaries: 0 });
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(7);
    expect((await ledger.status()).quarantined.rows).toEqual({ count: 1, since: quarantinedAt });

    // Its program row appears in D1 by another way (POST /v1/programs writes it directly); the retry is not due yet.
    await writeProgramSummary(database(env.DB), summary(tenant.id, orphan.programId));
    await runDurableObjectAlarm(ledger);
    expect(await usageRows(orphan.programId)).toEqual([]);
    // Ten minutes on, the retry writes it, once.
    clock.advance(QUARANTINE_RETRY_MS);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await usageRows(orphan.programId)).toEqual([expect.objectContaining({ call_id: orphan.callId, prompt_tokens: 10 })]);
    expect((await ledger.status()).quarantined.rows).toEqual({ count: 0, since: null });
    expect(await alarmOf(ledger)).toBeNull();
    expect(await usageReport(tenant)).toMatchObject({ ledger_quarantined_rows: 0, ledger_quarantined_since: null });
    // Handed over once more (a lost acknowledgement): still once in D1.
    await ledger.handOff({ programs: [], rows: [orphan] });
    await runDurableObjectAlarm(ledger);
    expect(await usageRows(orphan.programId)).toHaveLength(1);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(8);
  });

  it("tries a program's quarantined rows again as soon as the ledger writes its program row", async () => {
    frozenClock();
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    await batching(ledger);
    const orphans = [orphanRow(tenant.id)];
    orphans.push(row(tenant.id, orphans[0]!.programId, `${orphans[0]!.callId}_2`));
    await ledger.handOff({ programs: [], rows: orphans });
    await runDurableObjectAlarm(ledger);
    expect((await ledger.status()).quarantined.rows.count).toBe(2);
    // The program's row arrives late (its summary handed over after its rows): no 10 minutes' wait.
    await ledger.handOff({ programs: [summary(tenant.id, orphans[0]!.programId, { calls: 2 })], rows: [] });
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect((await usageRows(orphans[0]!.programId)).map((r) => r.call_id).sort()).toEqual(orphans.map((o) => o.callId).sort());
    expect((await ledger.status()).quarantined.rows.count).toBe(0);
  });

  it("finds every refused item of a large batch (rows and a program row), and sends all the others, in one alarm", async () => {
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    await batching(ledger);
    const programId = newProgramId();
    const good = Array.from({ length: 200 }, (_, i) => row(tenant.id, programId, `call_good_${i}_${programId.slice(-8)}`));
    const orphans = Array.from({ length: 5 }, () => orphanRow(tenant.id));
    // A program row of a tenant D1 does not know (programs.tenant_id references tenants.id), and its row.
    const strayProgram = summary("ten_missing", newProgramId());
    const strayRow = row(tenant.id, strayProgram.id, `call_stray_${strayProgram.id.slice(-8)}`);
    const rows = [...good];
    orphans.forEach((orphan, i) => rows.splice(i * 40 + 7, 0, orphan));
    rows.splice(100, 0, strayRow);
    expect(await ledger.handOff({ programs: [summary(tenant.id, programId, { calls: 200 }), strayProgram], rows })).toEqual({ ok: true });
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await usageRows(programId)).toHaveLength(200);
    expect(await programRow(programId)).toMatchObject({ calls: 200 });
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
    const status = await ledger.status();
    expect(status.quarantined.rows.count).toBe(6);
    expect(status.quarantined.summaries.count).toBe(1);
    const listed = await ledger.quarantined(100);
    expect(listed.map((item) => item.id).sort()).toEqual([...orphans.map((o) => o.callId), strayRow.callId, strayProgram.id].sort());
  });
});

describe("a program's hand-off to its ledger", () => {
  /** A USAGE_LEDGER whose stubs' hand-off fails as an unreachable object's does: before (or after) the real one ran. */
  function failingLedgers(when: "before" | "after"): Env["USAGE_LEDGER"] {
    return new Proxy(env.USAGE_LEDGER, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== "get" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
        return (id: DurableObjectId) => {
          const stub = target.get(id);
          return {
            handOff: async (input: Parameters<typeof stub.handOff>[0]) => {
              if (when === "after") await stub.handOff(input);
              throw new Error("Network connection lost.");
            },
          };
        };
      },
    }) as unknown as Env["USAGE_LEDGER"];
  }

  for (const when of ["before", "after"] as const) {
    it(`keeps the row until the ledger acknowledged it, and retries (the hand-off lost ${when} the ledger stored it)`, async () => {
      const tenant = await newTenant();
      const ledger = usageLedger(env, tenant.id);
      const failedAt = Date.now();
      const { programId, session, callIds } = await programWithSettledCalls(tenant.id, 1, (s) =>
        batching(s, { LEDGER_FLUSH_MS: "0", USAGE_LEDGER: failingLedgers(when) }),
      );
      // Settled in the program, not acknowledged: the program still holds the row, and its alarm retries after the backoff.
      expect(await heldByProgram(session)).toEqual(callIds);
      const retry = await alarmOf(session);
      expect(retry).not.toBeNull();
      expect(retry!).toBeGreaterThanOrEqual(failedAt + LEDGER_RETRY_FIRST_MS);
      expect(await usageRows(programId)).toHaveLength(when === "after" ? 1 : 0);

      // The ledger answers again: the retry hands it over, once.
      await batching(session, { LEDGER_FLUSH_MS: "0" });
      expect(await runDurableObjectAlarm(session)).toBe(true);
      expect(await heldByProgram(session)).toEqual([]);
      expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
      expect(await usageRows(programId)).toEqual([expect.objectContaining({ call_id: callIds[0], prompt_tokens: 10 })]);
      expect(await programRow(programId)).toMatchObject({ calls: 1, status: "active" });
    });
  }
});

describe("a program's hand-offs within the window", () => {
  /** A tenant whose ledger batches, and a program of it whose hand-offs are counted. */
  async function countedProgram(calls: number) {
    const tenant = await newTenant();
    const ledger = usageLedger(env, tenant.id);
    await batching(ledger);
    const counted = countedLedgers();
    const program = await programWithSettledCalls(tenant.id, calls, (s) => batching(s, { USAGE_LEDGER: counted.ledgers }));
    return { tenant, ledger, counted, ...program };
  }

  it("hands N calls settled within the window to the ledger in ONE hand-off carrying the N rows, from its alarm", async () => {
    const { ledger, counted, programId, session, started, callIds } = await countedProgram(5);
    // The settles handed nothing off: the rows wait in the program, its alarm due half a window after the first settle.
    expect(counted.handOffs).toEqual([]);
    expect(await heldByProgram(session)).toEqual(callIds);
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
    expect(await alarmOf(session)).toBe(started + programHandOffWaitMs(FLUSH_MS));

    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(counted.handOffs).toEqual([callIds]);
    expect(await heldByProgram(session)).toEqual([]);
    expect(await ledger.pendingCounts()).toEqual({ rows: 5, summaries: 1 });
    // The ledger's wait counts from the settle: its batch is due a window after the first settle, not after the hand-off.
    const due = await alarmOf(ledger);
    expect(due).not.toBeNull();
    expect(due!).toBeLessThanOrEqual(started + FLUSH_MS);
    // The program's next alarm (its idle expiry) has nothing to hand off.
    await runDurableObjectAlarm(session);
    expect(counted.handOffs).toHaveLength(1);

    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect((await usageRows(programId)).map((r) => r.call_id).sort()).toEqual([...callIds].sort());
    expect(await programRow(programId)).toMatchObject({ status: "active", calls: 5, prompt_tokens: 50 });
  });

  it("keeps rows pending through its restart, and its alarm hands them off once", async () => {
    const { tenant, ledger, counted, programId, session: before, callIds } = await countedProgram(3);
    // The object is thrown away (as an eviction or a crash would): only its storage (the rows and the alarm) remains.
    await expect(runInDurableObject(before, (_instance: object, state) => state.abort("restart"))).rejects.toThrow();
    const session = programSession(env, tenant.id, programId);
    expect(await heldByProgram(session)).toEqual(callIds);
    expect(await ledger.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
    await batching(session, { USAGE_LEDGER: counted.ledgers });

    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(counted.handOffs).toEqual([callIds]);
    expect(await heldByProgram(session)).toEqual([]);
    await runDurableObjectAlarm(session);
    expect(counted.handOffs).toHaveLength(1);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await usageRows(programId)).toHaveLength(3);
    expect(await programRow(programId)).toMatchObject({ calls: 3 });
  });

  it("hands off at once when the program ends, and a late settle after it at once too", async () => {
    const { tenant, ledger, counted, programId, session, callIds } = await countedProgram(2);
    const lateCall = `call_late_${programId.slice(-8)}`;
    const begun = await session.beginCall({ callId: lateCall, thread: "main", model: "m", now: Date.now() });
    expect(begun.ok).toBe(true);
    expect(await session.end({ now: Date.now() })).toMatchObject({ ok: true });
    expect(counted.handOffs).toEqual([callIds]);
    expect(await heldByProgram(session)).toEqual([]);
    expect(await ledger.pendingCounts()).toEqual({ rows: 2, summaries: 1 });

    expect(await session.settleCall(settlement(lateCall, Date.now()))).toEqual({ settled: true });
    expect(counted.handOffs).toEqual([callIds, [lateCall]]);
    expect(await runDurableObjectAlarm(ledger)).toBe(true);
    expect(await tenantUsageRows(tenant.id)).toHaveLength(3);
    expect(await programRow(programId)).toMatchObject({ status: "ended", calls: 3 });
  });
});

describe("ledger shards", () => {
  /** The tenant's first `count` ledger shards, batching. */
  async function shardsOf(tenantId: string, count: number): Promise<Ledger[]> {
    const shards = Array.from({ length: count }, (_, i) => ledgerShard(env, tenantId, i));
    for (const shard of shards) await batching(shard);
    return shards;
  }

  /** A new program ID whose ledger shard is `shard` of `count`. */
  function programIdOn(shard: number, count: number): string {
    for (;;) {
      const id = newProgramId();
      if (ledgerShardOf(id, count) === shard) return id;
    }
  }

  /** One more call of the program, begun with the tenant's ledger shards now, settled, and handed off by the program's alarm. */
  async function nextCall(program: { programId: string; session: Session }, ledgerShards: number): Promise<string> {
    const callId = `call_next_${ledgerShards}_${program.programId.slice(-8)}`;
    const begun = await program.session.beginCall({ callId, thread: "main", model: "m", ledgerShards, now: Date.now() });
    expect(begun.ok).toBe(true);
    expect(await program.session.settleCall(settlement(callId, Date.now()))).toEqual({ settled: true });
    expect(await runDurableObjectAlarm(program.session)).toBe(true);
    return callId;
  }

  it("spreads many programs' rows over N shards, each program's on one, and every row reaches D1 exactly once", async () => {
    const tenant = await newTenant();
    const shards = await shardsOf(tenant.id, 4);
    const programs = [];
    for (let i = 0; i < 16; i++) {
      const program = await programWithSettledCalls(tenant.id, 2, (s) => batching(s), { programId: programIdOn(i % 4, 4), ledgerShards: 4 });
      expect(await runDurableObjectAlarm(program.session)).toBe(true);
      programs.push(program);
    }
    // Each shard holds its 4 programs' rows and summaries, and nothing else.
    for (const shard of shards) expect(await shard.pendingCounts()).toEqual({ rows: 8, summaries: 4 });
    // Shard 0 knows how many shards the tenant has (each shard told it).
    expect((await shards[0]!.status()).shards).toBe(4);

    for (const shard of shards) expect(await runDurableObjectAlarm(shard)).toBe(true);
    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(32);
    expect(rows.map((r) => r.call_id).sort()).toEqual(programs.flatMap((p) => p.callIds).sort());
    for (const { programId } of programs) expect(await programRow(programId)).toMatchObject({ calls: 2 });
    for (const shard of shards) expect(await shard.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
  });

  it("loses and doubles nothing when N changes between hand-offs (a moved program takes its summary along)", async () => {
    const tenant = await newTenant();
    const shards = await shardsOf(tenant.id, 4);
    // N = 4 → 2: programs on shards 2 and 3 move to 0 and 1; those on 0 and 1 stay.
    const programs = [];
    for (let i = 0; i < 8; i++) {
      const program = await programWithSettledCalls(tenant.id, 1, (s) => batching(s), { programId: programIdOn(i % 4, 4), ledgerShards: 4 });
      expect(await runDurableObjectAlarm(program.session)).toBe(true);
      programs.push(program);
    }
    const seconds = [];
    for (const program of programs) seconds.push(await nextCall(program, 2));
    // The moved programs' second rows went to their new shard with their summary; their first rows wait on the old one.
    expect(await shards[2]!.pendingCounts()).toEqual({ rows: 2, summaries: 2 });
    // Shard 0: its own 2 programs' two rows each and their summaries, and the 2 moved programs' second rows and summaries.
    expect(await shards[0]!.pendingCounts()).toEqual({ rows: 2 + 2 + 2, summaries: 2 + 2 });
    // A hand-off repeated on another shard (its acknowledgement lost before N changed): the same call twice.
    const moved = programs[2]!;
    await shards[0]!.handOff({ programs: [], rows: [row(tenant.id, moved.programId, moved.callIds[0]!, { cachedTokens: 2 })], shard: 0, shards: 2 });

    // The new shards go first: their rows need the program rows they carry, not the old shards'.
    for (const shard of shards) expect(await runDurableObjectAlarm(shard)).toBe(true);
    const rows = await tenantUsageRows(tenant.id);
    expect(rows.map((r) => r.call_id).sort()).toEqual([...programs.flatMap((p) => p.callIds), ...seconds].sort());
    // An active program's row follows it when a summary is handed off: at its start, and when it moved.
    for (const [i, { programId }] of programs.entries()) expect(await programRow(programId)).toMatchObject({ calls: i % 4 >= 2 ? 2 : 1 });
    for (const shard of shards) {
      expect(await shard.pendingCounts()).toEqual({ rows: 0, summaries: 0 });
      expect((await shard.status()).quarantined.rows.count).toBe(0);
    }
  });

  it("reports freshness and quarantine from every shard the tenant used, those past a lowered N too", async () => {
    const clock = frozenClock();
    const tenant = await newTenant();
    const shards = await shardsOf(tenant.id, 4);
    // Shard 3 holds a row D1 refuses (quarantined); shard 2 a row not yet due.
    const orphan = orphanRow(tenant.id);
    expect(await shards[3]!.handOff({ programs: [], rows: [orphan], shard: 3, shards: 4 })).toEqual({ ok: true });
    expect(await runDurableObjectAlarm(shards[3]!)).toBe(true);
    const quarantinedAt = clock.now();
    const waiting = await programWithSettledCalls(tenant.id, 1, (s) => batching(s), { programId: programIdOn(2, 4), ledgerShards: 4 });
    expect(await runDurableObjectAlarm(waiting.session)).toBe(true);
    expect(await shards[2]!.pendingCounts()).toEqual({ rows: 1, summaries: 1 });
    // N is lowered to 1: the tenant's programs now hand off to shard 0 alone.
    clock.advance(10_000);
    const later = await programWithSettledCalls(tenant.id, 1, (s) => batching(s), { ledgerShards: 1 });
    expect(await runDurableObjectAlarm(later.session)).toBe(true);
    expect(await shards[0]!.pendingCounts()).toEqual({ rows: 1, summaries: 1 });

    // A minute on (D1 did not take shard 2's batch yet): the figures are as of that row's settle, not now minus the bound.
    clock.advance(60_000);
    const report = (await (await tenantFetch(tenant, "/v1/usage")).json()) as { data_as_of: string; ledger_quarantined_rows: number; ledger_quarantined_since: string };
    expect(report).toMatchObject({
      data_as_of: new Date(waiting.started).toISOString(),
      ledger_quarantined_rows: 1,
      ledger_quarantined_since: new Date(quarantinedAt).toISOString(),
    });
    const view = (await (await adminFetch(`/admin/tenants/${tenant.id}/ledger`)).json()) as {
      shards: { shard: number; pending_rows: number; quarantined_rows: number }[];
      quarantined: { shard: number; id: string }[];
    };
    expect(view.shards.map((s) => [s.shard, s.pending_rows, s.quarantined_rows])).toEqual([
      [0, 1, 0],
      [1, 0, 0],
      [2, 1, 0],
      [3, 0, 1],
    ]);
    expect(view.quarantined).toEqual([expect.objectContaining({ shard: 3, id: orphan.callId })]);
    const exported = (await (await adminFetch(`/admin/usage/export?period=${new Date(clock.now()).toISOString().slice(0, 7)}`)).json()) as {
      data_as_of: string;
      ledger_quarantined_rows: number;
    };
    expect(exported.ledger_quarantined_rows).toBeGreaterThanOrEqual(1);
    expect(Date.parse(exported.data_as_of)).toBeLessThanOrEqual(waiting.started);
  });

  it("follows the tenant's limiter shards through the API: a call's program hands off to its shard of N", async () => {
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ max_concurrent: 8, rpm: 1_000, tpm: 1_000_000, limiter_shards: 4 });
    const res = await chat(tenant);
    expect(res.status).toBe(200);
    await res.text();
    await drain();
    const programId = programHeader(res)!;
    const session = programSession(env, tenant.id, programId);
    const shards = await runInDurableObject(session, (instance: object) => (Reflect.get(instance, "meta") as { ledgerShards: number }).ledgerShards);
    expect(shards).toBe(4);
    // LEDGER_FLUSH_MS 0 in the tests: written through the program's shard before the settle answered.
    expect(await usageRows(programId)).toHaveLength(1);
    expect((await usageLedger(env, tenant.id).status()).shards).toBe(4);
  });
});
