import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { admitAndBegin } from "../../src/edge/chat/admission";
import { hashApiKey } from "../../src/edge/keys";
import { tenantLimiter } from "../../src/edge/limiter/access";
import { programSession } from "../../src/edge/program/access";
import { Header } from "../../src/protocol/headers";
import {
  adminFetch,
  chat,
  chatBody,
  drain,
  edge,
  expectOpenAIError,
  frozenClock,
  limitsOf,
  mockPool,
  newPlan,
  newTenant,
  poolJson,
  programHeader,
  setOverrides,
  setPlan,
  type TestTenant,
} from "./support";

/*
 * Issue 14's edge hot path: a call is authenticated and admitted by its tenant's limiter
 * in one round trip, without reading D1; what the limiter holds is reloaded by the admin
 * API before it answers, so changes apply from the next request.
 */

afterEach(() => {
  vi.restoreAllMocks();
});

/** Counts the D1 statements the Worker prepares and the batches it sends (the test shares the Worker's bindings). */
function countD1() {
  const prepare = vi.spyOn(env.DB, "prepare");
  const batch = vi.spyOn(env.DB, "batch");
  return () => prepare.mock.calls.length + batch.mock.calls.length;
}

describe("the edge hot path", () => {
  it("reads nothing from D1 before a call reaches the pool, once the isolate has seen the key", async () => {
    const d1Before: number[] = [];
    let counted: (() => number) | undefined;
    mockPool(() => {
      if (counted) d1Before.push(counted());
      return poolJson();
    });
    const tenant = await newTenant();
    expect((await chat(tenant)).status).toBe(200);
    await drain();

    // Counted from each request's start to its forwarding (the settles in between write the ledger).
    const total = countD1();
    let base = total();
    counted = () => total() - base;
    const fresh = await chat(tenant);
    expect(fresh.status).toBe(200);
    await drain();
    base = total();
    const again = await chat(tenant, chatBody(), { [Header.program]: programHeader(fresh)! });
    expect(again.status).toBe(200);
    await drain();
    // Neither the new program's call nor the existing program's touched D1 on the way to the pool.
    expect(d1Before).toEqual([0, 0]);
  });

  it("refuses a key revoked since the isolate cached its tenant's profile, from the next request", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    expect((await chat(tenant)).status).toBe(200);
    expect((await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).status).toBe(200);
    const refused = await chat(tenant);
    expect((await expectOpenAIError(refused, 401, "authentication_error")).error.code).toBe("invalid_api_key");
    await drain();
  });

  it("applies a limit override and a plan change from the next request", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const asking = (maxTokens: number) => chat(tenant, chatBody({ max_tokens: maxTokens }));
    expect((await asking(500)).status).toBe(200);

    await setOverrides(tenant, { max_output_tokens: 100 });
    const capped = await expectOpenAIError(await asking(500), 400);
    expect(capped.error).toMatchObject({ code: "max_tokens_above_plan_limit", param: "max_tokens" });

    await setOverrides(tenant, { max_output_tokens: null });
    await newPlan("hot-path-tiny", { max_output_tokens: 50 });
    await setPlan(tenant, "hot-path-tiny");
    expect((await expectOpenAIError(await asking(500), 400)).error.code).toBe("max_tokens_above_plan_limit");
    const plan = await adminFetch("/admin/plans/hot-path-tiny", { method: "PATCH", body: JSON.stringify({ max_output_tokens: 1000 }) });
    expect(plan.status).toBe(200);
    expect((await asking(500)).status).toBe(200);
    expect(pool).toHaveLength(2);
    await drain();
  });

  it("checks a call against the current profile when its cached copy would refuse it (extensions allowed since)", async () => {
    const pool = mockPool(() => poolJson());
    await newPlan("hot-path-ext", { allowed_extensions: [] });
    const tenant = await newTenant();
    await setPlan(tenant, "hot-path-ext");
    expect((await chat(tenant)).status).toBe(200);
    const withExtension = chatBody({ min_tokens: 2 });
    expect((await expectOpenAIError(await chat(tenant, withExtension), 400)).error.code).toBe("unsupported_parameter");

    const allowed = await adminFetch("/admin/plans/hot-path-ext", { method: "PATCH", body: JSON.stringify({ allowed_extensions: ["min_tokens"] }) });
    expect(allowed.status).toBe(200);
    expect((await chat(tenant, withExtension)).status).toBe(200);
    expect(JSON.parse(new TextDecoder().decode(pool.at(-1)!.body))).toMatchObject({ min_tokens: 2 });
    await drain();
  });

  it("keeps keys issued before keys named their tenant working, and revocable", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const legacyKey = `agx_${"L".repeat(20)}${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`;
    await env.DB.prepare("INSERT INTO api_keys (id, tenant_id, key_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?)")
      .bind("key_legacy0000000001", tenant.id, await hashApiKey(legacyKey), legacyKey.slice(0, 12), Date.now())
      .run();
    // Written to D1 the way a key issued before this change was: its limiter learns it when reloading.
    expect((await tenantLimiter(env, tenant.id).refreshProfile({ tenantId: tenant.id })).ok).toBe(true);
    const legacy: TestTenant = { ...tenant, key: legacyKey, keyId: "key_legacy0000000001" };
    expect((await chat(legacy)).status).toBe(200);
    expect((await chat(legacy)).status).toBe(200);

    expect((await adminFetch("/admin/keys/key_legacy0000000001", { method: "DELETE" })).status).toBe(200);
    await expectOpenAIError(await chat(legacy), 401, "authentication_error");
    // The tenant's own key is untouched.
    expect((await chat(tenant)).status).toBe(200);
    await drain();
  });

  it("loads a profile its limiter does not hold yet (a tenant from before the change) once, from D1", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const limiter = tenantLimiter(env, tenant.id);
    await runInDurableObject(limiter, (_instance, state) => {
      state.storage.sql.exec("DELETE FROM tenant_profile");
      state.storage.sql.exec("DELETE FROM tenant_keys");
    });
    expect((await chat(tenant)).status).toBe(200);
    const held = await runInDurableObject(limiter, (_instance, state) =>
      state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM tenant_keys").one().n,
    );
    expect(held).toBe(1);
    await drain();
  });

  it("answers a key of an unknown tenant like any wrong key", async () => {
    const unknown = await chat({ id: "ten_x", keyId: "key_x", key: `agx_${"Z".repeat(40)}_ten_${"Q".repeat(16)}` });
    expect((await expectOpenAIError(unknown, 401, "authentication_error")).error.code).toBe("invalid_api_key");
  });
});

describe("bench:edge's counts (COUNT_IO=1)", () => {
  it("count one round of two object calls and no D1 query before the pool on the hot path, two rounds and one query on the baseline", async () => {
    frozenClock(); // the isolate's pool snapshot stays fresh: no refresh joins the count
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const first = await chat(tenant);
    const programId = programHeader(first)!;
    await drain();
    const counted = async (vars: Record<string, string>) => {
      const res = await edge(
        "/v1/chat/completions",
        {
          method: "POST",
          body: chatBody(),
          headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json", [Header.program]: programId },
        },
        { ...env, COUNT_IO: "1", ...vars },
      );
      expect(res.status).toBe(200);
      await res.text();
      await drain();
      return res.headers.get(Header.ioCounts);
    };
    expect(await counted({})).toBe("objects=2;rounds=1;d1=0");
    expect(await counted({ EDGE_BASELINE_HOT_PATH: "1" })).toBe("objects=2;rounds=2;d1=1");
    // Without COUNT_IO nothing is counted or said.
    const plain = await chat(tenant, chatBody(), { [Header.program]: programId });
    expect(plain.headers.get(Header.ioCounts)).toBeNull();
    await drain();
  });
});

describe("a call's begin in parallel with its admission", () => {
  it("is taken back when the admission is refused: no call stays in flight, no new program remains", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    await setOverrides(tenant, { max_output_tokens: 100 });
    const first = await chat(tenant);
    expect(first.status).toBe(200);
    const programId = programHeader(first)!;
    await drain();

    // Refused by the limiter (above the plan's maximum) while the program begins the call.
    const refused = await chat(tenant, chatBody({ max_tokens: 500 }), { [Header.program]: programId });
    await expectOpenAIError(refused, 400);
    const state = await programSession(env, tenant.id, programId).state();
    expect(state).toMatchObject({ inFlight: 0, totals: expect.objectContaining({ calls: 1 }) });

    expect(pool).toHaveLength(1);
    await drain();
  });
});

describe("admitAndBegin", () => {
  it("drops the program a refused call's parallel begin created", async () => {
    const tenant = await newTenant();
    const programId = "prog_RefusedBeforeItBegan01";
    const stub = programSession(env, tenant.id, programId);
    const abandonCall = vi.fn((input: Parameters<typeof stub.abandonCall>[0]) => stub.abandonCall(input));
    const session = { beginCall: (input: Parameters<typeof stub.beginCall>[0]) => stub.beginCall(input), abandonCall };
    const now = Date.now();
    const outcome = await admitAndBegin({
      tenantId: tenant.id,
      limiter: tenantLimiter(env, tenant.id),
      session: session as unknown as typeof stub,
      admit: { callId: "call_refused_new", now, auth: { tenantId: tenant.id, keyHash: "not-a-key", profileVersion: 1 }, promptTokens: 5, newProgramId: programId },
      begin: { newProgram: { tenantId: tenant.id, programId }, callId: "call_refused_new", thread: "main", model: "m", now },
    });
    expect(outcome).toMatchObject({ kind: "admission_refused", admitted: { ok: false, refusal: "invalid_key" } });
    // The begin ran (in parallel) and was taken back, its program with it.
    expect(abandonCall).toHaveBeenCalledWith({ callId: "call_refused_new", createdByCall: true });
    expect(await abandonCall.mock.results[0]!.value).toEqual({ abandoned: true, programDropped: true });
    expect(await stub.state()).toBeNull();
    expect(await stub.beginCall({ callId: "call_later", thread: "main", model: "m", now })).toEqual({ ok: false, error: "not_found" });
  });

  it("goes back to admission-then-begin for a tenant for a second after a limit refused it, not after a profile change", async () => {
    const tenant = await newTenant();
    const limits = { ...(await limitsOf(tenant)), maxOutputTokens: 10 };
    const programId = "prog_CooldownAfterRefusal01";
    const stub = programSession(env, tenant.id, programId);
    const beginCall = vi.fn((input: Parameters<typeof stub.beginCall>[0]) => stub.beginCall(input));
    const session = { beginCall, abandonCall: (input: Parameters<typeof stub.abandonCall>[0]) => stub.abandonCall(input) };
    const attempt = (callId: string, admit: Record<string, unknown>) =>
      admitAndBegin({
        tenantId: tenant.id,
        limiter: tenantLimiter(env, tenant.id),
        session: session as unknown as typeof stub,
        admit: { callId, now: Date.now(), promptTokens: 5, newProgramId: programId, ...admit },
        begin: { newProgram: { tenantId: tenant.id, programId }, callId, thread: "main", model: "m", now: Date.now() },
      });
    // A stale profile version: refused before anything is taken, and not a reason to stop running in parallel.
    const stale = await attempt("call_stale", { auth: { tenantId: tenant.id, keyHash: await hashApiKey(tenant.key), profileVersion: 0 } });
    expect(stale).toMatchObject({ kind: "admission_refused", admitted: { refusal: "profile_changed" } });
    const refused = await attempt("call_too_long", { limits, maxTokens: 100 });
    expect(refused).toMatchObject({ kind: "admission_refused", admitted: { refusal: { reason: "max_tokens_above_plan" } } });
    expect(beginCall).toHaveBeenCalledTimes(2);
    // Within the cooldown the next refusal costs the program nothing: the begin waits for an admission.
    expect(await attempt("call_too_long_again", { limits, maxTokens: 100 })).toMatchObject({ kind: "admission_refused" });
    expect(beginCall).toHaveBeenCalledTimes(2);
    expect(await attempt("call_fits", { limits, maxTokens: 5 })).toMatchObject({ kind: "begun" });
    expect(beginCall).toHaveBeenCalledTimes(3);
  });
});
