import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hashApiKey } from "../../src/edge/keys";
import { admittedOnAnyShard, limiterShard } from "../../src/edge/limiter/access";
import { CallLimiter } from "../../src/edge/limiter/sharded-limiter";
import { shardLimits, shardWalk } from "../../src/edge/limiter/shards";
import type { TenantLimits } from "../../src/edge/limits/plan-limits";
import { Header } from "../../src/protocol/headers";
import {
  adminFetch,
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  frozenClock,
  gate,
  limitsOf,
  mockPool,
  newLimitedTenant,
  poolJson,
  programHeader,
  setOverrides,
  type TestTenant,
  tenantFetch,
  tenantUsageRows,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

async function newProgram(tenant: TestTenant): Promise<string> {
  const res = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
  expect(res.status).toBe(201);
  return programHeader(res)!;
}

/** What every shard of the tenant holds: settled + reserved tokens this period, and calls in flight. */
async function acrossShards(tenantId: string, limits: TenantLimits, shards: number, now: number) {
  let committed = 0;
  let inFlight = 0;
  for (let index = 0; index < shards; index++) {
    const snapshot = await limiterShard(env, tenantId, index).peek({ now, limits: shardLimits(limits, index, Math.max(shards, 2)) });
    committed += snapshot.budget.committed;
    inFlight += snapshot.inFlight;
  }
  return { committed, inFlight };
}

/** Call IDs whose walk starts on `shard` of `count`. */
function callIdsOnShard(shard: number, count: number, n: number, prefix: string): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < n; i++) {
    const id = `call_${prefix}${i}`;
    if (shardWalk(id, count)[0] === shard) ids.push(id);
  }
  return ids;
}

describe("a sharded limiter", () => {
  it("lets at most max_concurrent of a parallel burst through 4 shards; the walk fills every shard; slots come back", async () => {
    const release = gate();
    let inFlight = 0;
    let maxInFlight = 0;
    let arrived = 0;
    mockPool(async () => {
      inFlight += 1;
      arrived += 1;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await release.promise;
      inFlight -= 1;
      return poolJson();
    });
    const tenant = await newLimitedTenant({ max_concurrent: 8, rpm: 1_000, tpm: 1_000_000, limiter_shards: 4 });
    const programId = await newProgram(tenant);
    const statuses: number[] = [];
    const calls = Array.from({ length: 40 }, (_, i) =>
      chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: `t${i}` }).then(async (res) => {
        statuses.push(res.status);
        if (res.status !== 200) expect((await expectOpenAIError(res, 429)).error.code).toBe("concurrency_limit_exceeded");
        return res;
      }),
    );
    await vi.waitFor(() => expect([statuses.length, arrived]).toEqual([32, 8]), { timeout: 20_000, interval: 20 });
    release.open();
    await Promise.all(calls);
    await drain();
    expect(statuses.filter((s) => s === 200)).toHaveLength(8);
    expect(maxInFlight).toBe(8);
    const limits = await limitsOf(tenant);
    expect((await acrossShards(tenant.id, limits, 4, Date.now())).inFlight).toBe(0);
  });

  it("admits an uneven burst (every call hashing to one shard) up to the tenant's concurrency, by walking to the others", async () => {
    const clock = frozenClock();
    const tenant = await newLimitedTenant({ max_concurrent: 8, rpm: 1_000, tpm: 1_000_000, limiter_shards: 4 });
    const limits = await limitsOf(tenant);
    expect(limits.limiterShards).toBe(4);
    const ids = callIdsOnShard(2, 4, 9, "uneven");
    const results = await Promise.all(
      ids.map(async (callId) => {
        const limiter = new CallLimiter(env, tenant.id, limits);
        const admitted = await limiter.admitCall({ callId, now: clock.now(), limits, promptTokens: 5, maxTokens: 5 });
        return { admitted, shard: limiter.grantingIndex };
      }),
    );
    const ok = results.filter((r) => r.admitted.ok);
    expect(ok).toHaveLength(8);
    // Each shard holds its share (2) and no more.
    expect(new Set(ok.map((r) => r.shard))).toEqual(new Set([0, 1, 2, 3]));
    for (const shard of [0, 1, 2, 3]) expect(ok.filter((r) => r.shard === shard)).toHaveLength(2);
    const refused = results.find((r) => !r.admitted.ok)?.admitted;
    expect(refused).toMatchObject({ ok: false, refusal: { reason: "concurrency_limit" } });
    expect((await acrossShards(tenant.id, limits, 4, clock.now())).inFlight).toBe(8);
  });

  it("never spends more than the monthly budget under parallel bursts on 4 shards (shard 0 grants it in chunks)", async () => {
    const clock = frozenClock();
    const budget = 1_000;
    const tenant = await newLimitedTenant({ max_concurrent: 1_000, rpm: 10_000, tpm: 1_000_000, monthly_token_budget: budget, limiter_shards: 4 });
    const limits = await limitsOf(tenant);
    let settledTokens = 0;
    let admittedCount = 0;
    // Three waves of 40 parallel calls reserving 10 + 40 = 50 tokens each; each settles using all of it.
    for (let wave = 0; wave < 3; wave++) {
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const limiter = new CallLimiter(env, tenant.id, limits);
          const callId = `call_budget${wave}x${i}`;
          const admitted = await limiter.admitCall({ callId, now: clock.now(), limits, promptTokens: 10, maxTokens: 40 });
          if (!admitted.ok) return;
          admittedCount += 1;
          expect(await limiter.granting.settleLease({ callId, tokens: 50, finishedAt: clock.now() })).toEqual({ settled: true, expired: false });
          settledTokens += 50;
        }),
      );
    }
    expect(settledTokens).toBeLessThanOrEqual(budget);
    expect((await acrossShards(tenant.id, limits, 4, clock.now())).committed).toBe(settledTokens);
    // Grants stranded on a shard are at most one call's reservation each: the tenant gets nearly all of its budget.
    expect(admittedCount).toBeGreaterThanOrEqual((budget - 4 * 50) / 50);
    const refused = await new CallLimiter(env, tenant.id, limits).admitCall({ callId: "call_budget_after", now: clock.now(), limits, promptTokens: 10, maxTokens: 40 });
    expect(refused).toMatchObject({ ok: false, refusal: { limit: budget } });
  });

  it("loses and double-counts nothing when N changes mid-traffic: old calls settle on the shard that granted them", async () => {
    const clock = frozenClock();
    const budget = 2_000;
    const tenant = await newLimitedTenant({ max_concurrent: 16, rpm: 10_000, tpm: 1_000_000, monthly_token_budget: budget, limiter_shards: 4 });
    const before = await limitsOf(tenant);
    const admit = async (limits: TenantLimits, callId: string) => {
      const limiter = new CallLimiter(env, tenant.id, limits);
      const admitted = await limiter.admitCall({ callId, now: clock.now(), limits, promptTokens: 10, maxTokens: 40 });
      expect(admitted.ok).toBe(true);
      return { callId, limiter };
    };
    const old = await Promise.all(Array.from({ length: 8 }, (_, i) => admit(before, `call_oldN${i}`)));
    expect(new Set(old.map((call) => call.limiter.grantingIndex)).size).toBeGreaterThan(1);

    await setOverrides(tenant, { limiter_shards: 2 });
    const after = await limitsOf(tenant);
    expect(after.limiterShards).toBe(2);
    // The shards beyond the new N hold the new profile too: an isolate still on the old one is refused there as profile_changed.
    const keyHash = await hashApiKey(tenant.key);
    const versions = await Promise.all(
      [0, 1, 2, 3].map(async (index) => {
        const answer = await limiterShard(env, tenant.id, index).authenticate({ tenantId: tenant.id, keyHash, now: clock.now() });
        return answer.ok ? `${answer.version}:${answer.tenant.limits.limiterShards}` : "refused";
      }),
    );
    expect(new Set(versions)).toEqual(new Set([versions[0]]));
    expect(versions[0]).toMatch(/:2$/);
    const young = await Promise.all(Array.from({ length: 8 }, (_, i) => admit(after, `call_newN${i}`)));
    expect(young.every((call) => call.limiter.grantingIndex < 2)).toBe(true);

    let settled = 0;
    for (const [i, call] of [...old, ...young].entries()) {
      const tokens = 20 + i;
      expect(await call.limiter.granting.settleLease({ callId: call.callId, tokens, finishedAt: clock.now() })).toEqual({ settled: true, expired: false });
      // A repeat on the same shard, or the call's settle sent to another shard, changes nothing.
      expect(await call.limiter.granting.settleLease({ callId: call.callId, tokens, finishedAt: clock.now() })).toMatchObject({ settled: false });
      const other = limiterShard(env, tenant.id, (call.limiter.grantingIndex + 1) % 4);
      expect(await other.settleLease({ callId: call.callId, tokens, finishedAt: clock.now() })).toMatchObject({ settled: false, reason: "unknown_call" });
      settled += tokens;
    }
    const total = await acrossShards(tenant.id, after, 4, clock.now());
    expect(total).toEqual({ committed: settled, inFlight: 0 });
  });

  it("through the API: N changes 4 -> 2 -> 3 while calls are in flight; every call is billed once and the shards hold exactly the ledger's tokens", async () => {
    const release = gate();
    mockPool(async () => {
      await release.promise;
      return poolJson({ usage: { prompt: 7, completion: 3 } });
    });
    const tenant = await newLimitedTenant({ max_concurrent: 64, rpm: 1_000, tpm: 1_000_000, monthly_token_budget: 100_000, limiter_shards: 4 });
    const programId = await newProgram(tenant);
    const wave = (name: string) =>
      Array.from({ length: 12 }, (_, i) => chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: `${name}${i}` }));
    const first = wave("a");
    await setOverrides(tenant, { limiter_shards: 2 });
    const second = wave("b");
    await setOverrides(tenant, { limiter_shards: 3 });
    const third = wave("c");
    release.open();
    const answers = await Promise.all([...first, ...second, ...third]);
    await drain();
    const ok = answers.filter((res) => res.status === 200).length;
    // A call checked on the profile of before a change is checked again on the new one; one that meets both
    // changes answers 503 profile_changed ("retry"), having taken nothing. No other answer.
    for (const res of answers.filter((res) => res.status !== 200)) expect((await expectOpenAIError(res, 503)).error.code).toBe("profile_changed");
    expect(ok).toBeGreaterThanOrEqual(24);
    const rows = await tenantUsageRows(tenant.id);
    expect(rows).toHaveLength(ok);
    expect(new Set(rows.map((row) => row.call_id)).size).toBe(ok);
    const billed = rows.reduce((sum, row) => sum + Number(row.prompt_tokens) + Number(row.completion_tokens), 0);
    expect(billed).toBe(ok * 10);
    const limits = await limitsOf(tenant);
    expect(await acrossShards(tenant.id, limits, 4, Date.now())).toEqual({ committed: billed, inFlight: 0 });
  });

  it("counts active programs once (on shard 0), even when another shard admits the program's first call", async () => {
    const clock = frozenClock();
    const tenant = await newLimitedTenant({ max_concurrent: 4, max_active_programs: 2, rpm: 1_000, tpm: 1_000_000, limiter_shards: 4 });
    const limits = await limitsOf(tenant);
    // Shard 0's one concurrency slot is taken: the next program's first call is admitted elsewhere, its program on shard 0.
    const busy = new CallLimiter(env, tenant.id, limits);
    const firstId = callIdsOnShard(0, 4, 1, "busy")[0]!;
    expect(await busy.admitCall({ callId: firstId, now: clock.now(), limits, promptTokens: 1, maxTokens: 1, newProgramId: "prog_ShardedFirst000000001" })).toMatchObject({ ok: true });
    expect(busy.grantingIndex).toBe(0);
    const moved = new CallLimiter(env, tenant.id, limits);
    expect(await moved.admitCall({ callId: "call_moved", now: clock.now(), limits, promptTokens: 1, maxTokens: 1, newProgramId: "prog_ShardedSecond00000001" })).toMatchObject({ ok: true });
    expect(moved.grantingIndex).not.toBe(0);
    const third = await new CallLimiter(env, tenant.id, limits).admitCall({ callId: "call_third", now: clock.now(), limits, promptTokens: 1, maxTokens: 1, newProgramId: "prog_ShardedThird000000001" });
    expect(third).toMatchObject({ ok: false, refusal: { reason: "active_programs_limit", limit: 2 } });
    const counts = await Promise.all([0, 1, 2, 3].map(async (i) => (await limiterShard(env, tenant.id, i).peek({ now: clock.now(), limits })).activePrograms));
    expect(counts).toEqual([2, 0, 0, 0]);
    // Cancelling the moved call frees its program on shard 0 and its lease on its own shard.
    expect(await moved.cancelLease({ callId: "call_moved", now: clock.now(), releaseProgramId: "prog_ShardedSecond00000001" })).toMatchObject({ cancelled: true });
    expect((await limiterShard(env, tenant.id, 0).peek({ now: clock.now(), limits })).activePrograms).toBe(1);
  });

  it("finds a call's admission on whichever shard granted it (the program reaper's question), also after N was lowered", async () => {
    const clock = frozenClock();
    const tenant = await newLimitedTenant({ max_concurrent: 8, rpm: 1_000, tpm: 1_000_000, limiter_shards: 4 });
    const limits = await limitsOf(tenant);
    const [callId] = callIdsOnShard(3, 4, 1, "reaped");
    const limiter = new CallLimiter(env, tenant.id, limits);
    expect(await limiter.admitCall({ callId: callId!, now: clock.now(), limits, promptTokens: 1, maxTokens: 1 })).toMatchObject({ ok: true });
    expect(limiter.grantingIndex).toBe(3);
    await setOverrides(tenant, { limiter_shards: 1 });
    expect(await admittedOnAnyShard(env, tenant.id, callId!)).toBe(true);
    expect(await admittedOnAnyShard(env, tenant.id, "call_neverAdmitted")).toBe(false);
  });

  it("applies a revocation on every shard from the next request (the admin API reloads all N)", async () => {
    mockPool(() => poolJson());
    const tenant = await newLimitedTenant({ max_concurrent: 8, limiter_shards: 4 });
    const keyHash = await hashApiKey(tenant.key);
    const now = Date.now();
    for (let index = 0; index < 4; index++) {
      expect(await limiterShard(env, tenant.id, index).authenticate({ tenantId: tenant.id, keyHash, now })).toMatchObject({ ok: true });
    }
    // Every shard names the same profile version, so an isolate's cached copy is current on all of them.
    const versions = await Promise.all(
      [0, 1, 2, 3].map(async (index) => {
        const answer = await limiterShard(env, tenant.id, index).authenticate({ tenantId: tenant.id, keyHash, now });
        return answer.ok ? answer.version : -1;
      }),
    );
    expect(new Set(versions).size).toBe(1);
    const okCalls = await Promise.all(Array.from({ length: 8 }, () => chat(tenant)));
    expect(okCalls.map((res) => res.status)).toEqual(Array(8).fill(200));
    await drain();

    expect((await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).status).toBe(200);
    for (let index = 0; index < 4; index++) {
      expect(await limiterShard(env, tenant.id, index).authenticate({ tenantId: tenant.id, keyHash, now: Date.now() })).toEqual({
        ok: false,
        refusal: "invalid_key",
      });
    }
    const refused = await Promise.all(Array.from({ length: 8 }, () => chat(tenant)));
    for (const res of refused) await expectOpenAIError(res, 401);
  });
});
