import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LEDGER_RETRY_FIRST_MS } from "../../src/edge/ledger/flush-schedule";
import { programSession } from "../../src/edge/program/access";
import { edgeConfig } from "../../src/edge/env";
import { ALARM_SLACK_MS, HAND_OFF_SLACK_MS, ledgerFreshness } from "../../src/edge/usage/freshness";
import { adminFetch, newTenant, programRow, programWithSettledCalls, settlement, tenantFetch, usageRows } from "./support";

/*
 * The per-program ledger, kept as bench:edge --ledger's baseline (EDGE_BASELINE_PROGRAM_LEDGER):
 * usage rows wait in their program's object and reach D1 in one batch per program within
 * LEDGER_FLUSH_MS. The test config writes rows at each settle (LEDGER_FLUSH_MS 0) for the
 * other tests; here each object gets batching and the baseline turned on. The tenant
 * ledger that replaced it on the call path: test/edge/usage-ledger.test.ts.
 */

const FLUSH_MS = 5_000;

afterEach(() => {
  vi.restoreAllMocks();
});

type Session = ReturnType<typeof programSession>;
type BatchSpy = { batch: (...args: unknown[]) => Promise<unknown> };

/** Turns batching on in this object, on the baseline's path (its env is what the object reads both from). */
async function batching(session: Session): Promise<void> {
  await runInDurableObject(session, (instance) => {
    Reflect.set(instance, "env", { ...env, LEDGER_FLUSH_MS: String(FLUSH_MS), EDGE_BASELINE_PROGRAM_LEDGER: "1" });
  });
}

/** A spy on the object's D1 batches (every ledger write goes through one). */
async function batches(session: Session) {
  return runInDurableObject(session, (instance) => vi.spyOn(Reflect.get(instance, "db") as BatchSpy, "batch"));
}

const alarmOf = (session: Session) => runInDurableObject(session, (_instance, state) => state.storage.getAlarm());

/** A new tenant's new program with `calls` calls begun and settled, its rows pending in the program. */
async function settledProgram(calls: number) {
  const tenant = await newTenant();
  return { tenant, ...(await programWithSettledCalls(tenant.id, calls, batching)) };
}

describe("the per-program ledger (the baseline)", () => {
  it("keeps settled rows in the program's object and sends them to D1 in one batch within LEDGER_FLUSH_MS", async () => {
    const { programId, session, started } = await settledProgram(3);
    // Nothing reached D1 at the settles: neither the program row nor a usage row.
    expect(await usageRows(programId)).toEqual([]);
    expect(await programRow(programId)).toBeNull();
    const due = await alarmOf(session);
    expect(due).not.toBeNull();
    expect(due!).toBeLessThanOrEqual(started + FLUSH_MS);

    const spy = await batches(session);
    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(spy).toHaveBeenCalledTimes(1);
    expect(await usageRows(programId)).toHaveLength(3);
    expect(await programRow(programId)).toMatchObject({ status: "active", calls: 3, prompt_tokens: 30 });
  });

  it("loses nothing when the object restarts between the settle and the batch", async () => {
    const { tenant, programId, session: before, callIds } = await settledProgram(2);
    // The object is thrown away (as an eviction or a crash would): only its storage remains.
    await expect(runInDurableObject(before, (_instance, state) => state.abort("restart"))).rejects.toThrow();
    expect(await usageRows(programId)).toEqual([]);
    const session = programSession(env, tenant.id, programId);

    expect(await runDurableObjectAlarm(session)).toBe(true);
    const rows = await usageRows(programId);
    expect(rows.map((row) => row.call_id).sort()).toEqual([...callIds].sort());
    // Another alarm, and a repeated settle, write nothing more.
    await runDurableObjectAlarm(session);
    expect(await session.settleCall(settlement(callIds[0]!, Date.now()))).toMatchObject({ settled: false, reason: "already_settled" });
    await runDurableObjectAlarm(session);
    expect(await usageRows(programId)).toHaveLength(2);
  });

  it("retries a batch D1 refused, with backoff, and writes each row exactly once", async () => {
    const { programId, session } = await settledProgram(2);
    const spy = await batches(session);
    spy.mockRejectedValueOnce(new Error("D1_ERROR: database unavailable"));
    const failedAt = Date.now();
    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(await usageRows(programId)).toEqual([]);
    // The retry is armed: after the first backoff, not at the full flush delay.
    const retry = await alarmOf(session);
    expect(retry).not.toBeNull();
    expect(retry!).toBeGreaterThanOrEqual(failedAt + LEDGER_RETRY_FIRST_MS);
    expect(retry!).toBeLessThan(Date.now() + LEDGER_RETRY_FIRST_MS + 1_000);

    expect(await runDurableObjectAlarm(session)).toBe(true);
    expect(await usageRows(programId)).toHaveLength(2);
    expect(spy).toHaveBeenCalledTimes(2);
    await runDurableObjectAlarm(session);
    expect(await usageRows(programId)).toHaveLength(2);
  });

  it("counts a call settled twice once, in D1 and in the program's totals", async () => {
    const { programId, session, callIds, started } = await settledProgram(1);
    const again = settlement(callIds[0]!, started + 50, { promptTokens: 999, completionTokens: 999 });
    expect(await session.settleCall(again)).toMatchObject({ settled: false, reason: "already_settled" });
    expect(await runDurableObjectAlarm(session)).toBe(true);
    // The same settle once more after the batch went out.
    expect(await session.settleCall(again)).toMatchObject({ settled: false, reason: "already_settled" });
    await runDurableObjectAlarm(session);
    const rows = await usageRows(programId);
    expect(rows).toEqual([expect.objectContaining({ call_id: callIds[0], prompt_tokens: 10, completion_tokens: 5 })]);
    expect(await programRow(programId)).toMatchObject({ calls: 1, prompt_tokens: 10 });
  });
});

describe("the ledger's freshness", () => {
  it("is stated by GET /v1/usage and the export: rows wait at most LEDGER_FLUSH_MS, the alarm's and the hand-off's slack", async () => {
    const tenant = await newTenant();
    const before = Date.now();
    const usage = (await (await tenantFetch(tenant, "/v1/usage")).json()) as { data_as_of: string; ledger_delay_ms: number };
    // The test config writes rows at each settle: nothing is behind.
    expect(usage.ledger_delay_ms).toBe(0);
    expect(Date.parse(usage.data_as_of)).toBeGreaterThanOrEqual(before);
    const exported = (await (await adminFetch(`/admin/usage/export?period=${new Date().toISOString().slice(0, 7)}`)).json()) as {
      data_as_of: string;
      ledger_delay_ms: number;
    };
    expect(exported).toMatchObject({ ledger_delay_ms: 0 });

    // Handed off half a window after the settle (plus the program's alarm's and the hand-off's slack), written a window
    // after the settle, plus the ledger's alarm's slack: 6 s for a 5 s window.
    const bound = Math.max(FLUSH_MS, FLUSH_MS / 2 + ALARM_SLACK_MS + HAND_OFF_SLACK_MS) + ALARM_SLACK_MS;
    expect(bound).toBe(6_000);
    const batched = ledgerFreshness({ ...edgeConfig(env), ledgerFlushMs: FLUSH_MS }, before);
    expect(batched).toEqual({
      data_as_of: new Date(before - bound).toISOString(),
      ledger_delay_ms: bound,
      ledger_quarantined_rows: 0,
      ledger_quarantined_since: null,
    });
    // The baseline has no hand-off: its rows wait in the program that settled them.
    const baseline = ledgerFreshness({ ...edgeConfig(env), ledgerFlushMs: FLUSH_MS, baselineProgramLedger: true }, before);
    expect(baseline.ledger_delay_ms).toBe(FLUSH_MS + ALARM_SLACK_MS);
  });
});
