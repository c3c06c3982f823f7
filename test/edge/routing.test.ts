import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { poolMonitor, refreshPoolSnapshot } from "../../src/edge/pools/directory-cache";
import type { PoolMonitor } from "../../src/edge/pools/monitor";
import { Header } from "../../src/protocol/headers";
import {
  addPools,
  adminFetch,
  chat,
  chatBody,
  drain,
  edge,
  expectOpenAIError,
  type ForwardedRequest,
  mockPool,
  newPlan,
  newTenant,
  poolJson,
  poolStatusResponse,
  programHeader,
  setPlan,
  type TestTenant,
  tenantFetch,
  testPool,
  usageRows,
} from "./support";

/*
 * Issue 11: the edge chooses a pool per call from the directory. Pools here live at
 * http://<id>.pools.test; each test uses its own pool IDs and model (D1 and the
 * isolate's circuit breakers are shared by the file's tests).
 */

afterEach(() => {
  vi.restoreAllMocks();
});

const urlOf = (id: string) => `http://${id}.pools.test`;
const poolOf = (f: ForwardedRequest) => new URL(f.request.url).hostname.split(".")[0];
const calls = (seen: ForwardedRequest[]) => seen.filter((f) => f.request.url.endsWith("/v1/chat/completions"));

/** Pools for one model, one per entry: `id@region`. */
async function poolsFor(model: string, ...specs: string[]): Promise<void> {
  await addPools(
    ...specs.map((spec) => {
      const [id = spec, region = "us-east"] = spec.split("@");
      return testPool({ id, region, url: urlOf(id), models: [model] });
    }),
  );
}

/** A fake fleet: each pool answers as `behaviour[id]` says (default: an engine of that pool serves the call). */
function fleet(behaviour: Record<string, "down" | 503 | ((f: ForwardedRequest) => Response)> = {}) {
  return mockPool((f) => {
    const id = poolOf(f) ?? "";
    const how = behaviour[id];
    if (how === "down") throw new TypeError("connection refused");
    if (how === 503) {
      return new Response(JSON.stringify({ error: { message: "no engine", type: "server_error", code: "no_engine", param: null } }), { status: 503 });
    }
    if (how) return how(f);
    return poolJson({ stats: { engine: `${id}-engine-0`, queueMs: 1, serviceMs: 50 } });
  });
}

async function call(tenant: TestTenant, model: string, programId?: string, init: RequestInit = {}): Promise<Response> {
  const res = await chat(tenant, chatBody({ model }), programId ? { [Header.program]: programId } : {}, init);
  await drain();
  return res;
}

describe("choosing a pool", () => {
  it("keeps a program's calls on its pool and tells the client which one took each call", async () => {
    await poolsFor("r1-model", "r1a", "r1b");
    const seen = fleet();
    const tenant = await newTenant();
    const first = await call(tenant, "r1-model");
    expect(first.status).toBe(200);
    const home = first.headers.get(Header.pool);
    expect(["r1a", "r1b"]).toContain(home);
    const programId = programHeader(first)!;
    for (let i = 0; i < 5; i += 1) {
      const next = await call(tenant, "r1-model", programId);
      expect(next.status).toBe(200);
      expect(next.headers.get(Header.pool)).toBe(home);
    }
    const sent = calls(seen);
    expect(sent.map(poolOf)).toEqual(Array(6).fill(home));
    // From the second call on, the program's engine on its pool travels as the affinity hint.
    expect(sent[0]?.request.headers.get(Header.engine)).toBe("");
    expect(sent[5]?.request.headers.get(Header.engine)).toBe(`${home}-engine-0`);
    expect((await usageRows(programId)).map((row) => row.pool)).toEqual(Array(6).fill(home));
  });

  it("refuses a model no pool serves for the tenant with 404 model_not_found, before any quota is taken", async () => {
    await poolsFor("r2-model", "r2a");
    const seen = fleet();
    const tenant = await newTenant();
    const res = await call(tenant, "r2-unserved");
    const body = await expectOpenAIError(res, 404, "invalid_request_error");
    expect(body.error).toMatchObject({ code: "model_not_found", param: "model" });
    expect(res.headers.get(Header.program)).toBeNull();
    expect(calls(seen)).toHaveLength(0);
    // Nothing reserved: the next call is the tenant's first in its rate window.
    const served = await call(tenant, "r2-model");
    expect(served.status).toBe(200);
    const limit = Number(served.headers.get("x-ratelimit-limit-requests"));
    expect(served.headers.get("x-ratelimit-remaining-requests")).toBe(String(limit - 1));
  });

  it("fails over before the first byte on a connection error and on 502/503, and the program moves with the call", async () => {
    await poolsFor("r3-model", "r3a", "r3b");
    const tenant = await newTenant();
    let seen = fleet();
    const first = await call(tenant, "r3-model");
    const home = first.headers.get(Header.pool)!;
    const other = home === "r3a" ? "r3b" : "r3a";
    const programId = programHeader(first)!;

    vi.restoreAllMocks();
    const warned = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    seen = fleet({ [home]: "down" });
    const moved = await call(tenant, "r3-model", programId);
    expect(moved.status).toBe(200);
    expect(moved.headers.get(Header.pool)).toBe(other);
    expect(calls(seen).map(poolOf)).toEqual([home, other]);
    // The old pool's engine means nothing on the new one.
    expect(calls(seen)[1]?.request.headers.get(Header.engine)).toBe("");
    expect(warned).toHaveBeenCalledWith(expect.stringContaining(`pool ${home} could not be reached`), expect.any(TypeError));

    // Re-pinned: the next call goes to the new pool first, even with the old one back.
    vi.restoreAllMocks();
    seen = fleet();
    const after = await call(tenant, "r3-model", programId);
    expect(after.headers.get(Header.pool)).toBe(other);
    expect(calls(seen).map(poolOf)).toEqual([other]);

    // A 503 fails over too.
    vi.restoreAllMocks();
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    seen = fleet({ [other]: 503 });
    const back = await call(tenant, "r3-model", programId);
    expect(back.status).toBe(200);
    expect(calls(seen).map(poolOf)).toEqual([other, home]);

    // Every call settled once, on the pool that took it.
    const rows = await usageRows(programId);
    expect(rows.map((row) => [row.pool, row.status])).toEqual([
      [home, "ok"],
      [other, "ok"],
      [other, "ok"],
      [home, "ok"],
    ]);
  });

  it("relays the last pool's 503 when every pool refuses, and settles the call once with nothing used", async () => {
    await poolsFor("r4-model", "r4a", "r4b");
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const seen = fleet({ r4a: 503, r4b: 503 });
    const tenant = await newTenant();
    const res = await call(tenant, "r4-model");
    const body = await expectOpenAIError(res, 503, "server_error");
    expect(body.error.code).toBe("no_engine");
    expect(calls(seen)).toHaveLength(2);
    const rows = await usageRows(programHeader(res)!);
    expect(rows).toEqual([expect.objectContaining({ status: "error", prompt_tokens: 0, completion_tokens: 0 })]);
  });

  it("opens a pool's breaker after 3 failures in a row: later calls skip it without trying", async () => {
    await poolsFor("r5-model", "r5a", "r5b");
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const tenant = await newTenant();
    const seen = fleet({ r5a: "down" });
    // New programs rank r5a first (same region and load: by ID) until its breaker opens.
    for (let i = 0; i < 5; i += 1) expect((await call(tenant, "r5-model")).headers.get(Header.pool)).toBe("r5b");
    expect(calls(seen).map(poolOf)).toEqual(["r5a", "r5b", "r5a", "r5b", "r5a", "r5b", "r5b", "r5b"]);
  });

  it("never leaves a residency-restricted tenant's regions, not even on failover: 503 instead", async () => {
    await poolsFor("r6-model", "r6eu@eu-west", "r6us@us-east");
    await newPlan("r6-eu-only", { allowed_regions: ["eu-west"] });
    const tenant = await newTenant();
    await setPlan(tenant, "r6-eu-only");
    let seen = fleet();
    const ok = await call(tenant, "r6-model");
    expect(ok.headers.get(Header.pool)).toBe("r6eu");

    vi.restoreAllMocks();
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    seen = fleet({ r6eu: "down" });
    const programId = programHeader(ok)!;
    const refused = await call(tenant, "r6-model", programId);
    const body = await expectOpenAIError(refused, 502, "server_error");
    expect(body.error.code).toBe("pool_unreachable");
    expect(calls(seen).map(poolOf)).toEqual(["r6eu"]);

    // Once the EU pool is disabled, nothing in the tenant's regions serves the model.
    expect((await adminFetch("/admin/pools/r6eu/disable", { method: "POST" })).status).toBe(200);
    await expectOpenAIError(await call(tenant, "r6-model", programId), 404, "invalid_request_error");
    expect(calls(seen).map(poolOf)).toEqual(["r6eu"]);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { in_flight: number };
    expect(state.in_flight).toBe(0);

    // A tenant without the restriction goes to the US pool.
    const anywhere = await newTenant();
    expect((await call(anywhere, "r6-model")).headers.get(Header.pool)).toBe("r6us");
  });

  it("answers 503 no_pool_available when every eligible pool's breaker is open, and frees the call's slot", async () => {
    await poolsFor("r7-model", "r7eu@eu-west");
    await newPlan("r7-eu-only", { allowed_regions: ["eu-west"], max_concurrent: 1 });
    const tenant = await newTenant();
    await setPlan(tenant, "r7-eu-only");
    // Each failed call's resend would otherwise be recognised as its retry, in its program: here every call is its own.
    expect((await adminFetch(`/admin/tenants/${tenant.id}`, { method: "PATCH", body: JSON.stringify({ program_inference: false }) })).status).toBe(200);
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const seen = fleet({ r7eu: "down" });
    for (let i = 0; i < 3; i += 1) await expectOpenAIError(await call(tenant, "r7-model"), 502, "server_error");
    const refused = await call(tenant, "r7-model");
    const body = await expectOpenAIError(refused, 503, "server_error");
    expect(body.error.code).toBe("no_pool_available");
    expect(refused.headers.get("retry-after")).toBe("2");
    expect(calls(seen)).toHaveLength(3);
    expect(await usageRows(programHeader(refused)!)).toEqual([expect.objectContaining({ status: "error", pool: "" })]);
    // max_concurrent 1: a leaked slot would make this 429.
    await expectOpenAIError(await call(tenant, "r7-model"), 503, "server_error");
  });

  it("sends new programs to the client's nearest region (REGION_ORDER by request.cf.continent)", async () => {
    await poolsFor("r8-model", "r8eu@eu-west", "r8us@us-east");
    fleet();
    const tenant = await newTenant();
    const from = (continent: string) =>
      edge(
        "/v1/chat/completions",
        {
          method: "POST",
          body: chatBody({ model: "r8-model" }),
          headers: { authorization: `Bearer ${tenant.key}`, "content-type": "application/json" },
          cf: { continent },
        } as RequestInit,
      );
    expect((await from("EU")).headers.get(Header.pool)).toBe("r8eu");
    expect((await from("NA")).headers.get(Header.pool)).toBe("r8us");
    await drain();
  });

  it("gives a drained pool no new programs but keeps its programs there; disabling it moves them", async () => {
    await poolsFor("r9-model", "r9a", "r9b");
    const seen = fleet();
    const tenant = await newTenant();
    const first = await call(tenant, "r9-model");
    expect(first.headers.get(Header.pool)).toBe("r9a");
    const programId = programHeader(first)!;

    expect((await adminFetch("/admin/pools/r9a/drain", { method: "POST" })).status).toBe(200);
    for (let i = 0; i < 3; i += 1) expect((await call(tenant, "r9-model")).headers.get(Header.pool)).toBe("r9b");
    expect((await call(tenant, "r9-model", programId)).headers.get(Header.pool)).toBe("r9a");

    expect((await adminFetch("/admin/pools/r9a/disable", { method: "POST" })).status).toBe(200);
    expect((await call(tenant, "r9-model", programId)).headers.get(Header.pool)).toBe("r9b");
    expect(calls(seen).map(poolOf)).toEqual(["r9a", "r9b", "r9b", "r9b", "r9a", "r9b"]);
  });

  it("steers by the monitor's readings: away from a pool with no healthy engine, and new programs to the less loaded", async () => {
    await poolsFor("r10-model", "r10a", "r10b", "r10c");
    mockPool(
      (f) => poolJson({ stats: { engine: `${poolOf(f)}-e`, queueMs: 1, serviceMs: 5 } }),
      (url) => {
        const id = new URL(url).hostname.split(".")[0] ?? "";
        if (id === "r10a") return poolStatusResponse({ healthy: 0 });
        if (id === "r10b") return poolStatusResponse({ queued: 40, running: 8 });
        return poolStatusResponse({ running: 1 });
      },
    );
    // One status round, as the monitor's alarm runs it (vitest.config.ts sets the interval to an hour: no other round runs).
    const monitor = poolMonitor(env);
    await runInDurableObject(monitor, (instance) => (instance as PoolMonitor).alarm());
    const snapshot = await monitor.snapshot();
    await refreshPoolSnapshot(env);
    expect(snapshot.readings.r10a).toMatchObject({ healthy: false, load: 0 });
    expect(snapshot.readings.r10b).toMatchObject({ healthy: true, load: 24 });
    expect(snapshot.readings.r10c).toMatchObject({ healthy: true, load: 0.5 });
    const tenant = await newTenant();
    for (let i = 0; i < 3; i += 1) expect((await call(tenant, "r10-model")).headers.get(Header.pool)).toBe("r10c");
    // The operator sees the same readings.
    const listed = (await (await adminFetch("/admin/pools")).json()) as { data: { id: string; health: Record<string, unknown> | null }[] };
    const health = Object.fromEntries(listed.data.filter((p) => p.id.startsWith("r10")).map((p) => [p.id, p.health]));
    expect(health.r10a).toMatchObject({ healthy: false, load: 0, engines: { total: 2, healthy: 0 } });
    expect(health.r10b).toMatchObject({ healthy: true, load: 24, queued: 40, running: 8 });
    expect(await (await adminFetch("/admin/pools/r10c")).json()).toMatchObject({ health: { healthy: true, load: 0.5 } });
  });
});

describe("load from the pools' answers", () => {
  it("sends new programs away from a pool whose last answer said it is busy, before any status round", async () => {
    await poolsFor("r12-model", "r12a", "r12b");
    const loads: Record<string, string> = { r12a: "40", r12b: "0" };
    const seen = fleet(
      Object.fromEntries(
        ["r12a", "r12b"].map((id) => [
          id,
          () => {
            const res = poolJson({ stats: { engine: `${id}-e`, queueMs: 1, serviceMs: 5 } });
            res.headers.set(Header.poolLoad, loads[id] ?? "0");
            return res;
          },
        ]),
      ),
    );
    const tenant = await newTenant();
    const first = await call(tenant, "r12-model");
    // The pool's load is the edge's business: the client does not see it.
    expect(first.headers.get(Header.poolLoad)).toBeNull();
    expect((await call(tenant, "r12-model")).headers.get(Header.pool)).toBe("r12b");
    loads.r12b = "60";
    expect((await call(tenant, "r12-model")).headers.get(Header.pool)).toBe("r12b");
    expect((await call(tenant, "r12-model")).headers.get(Header.pool)).toBe("r12a");
    expect(calls(seen).map(poolOf)).toEqual(["r12a", "r12b", "r12b", "r12a"]);
  });
});

describe("tool events", () => {
  it("go to the program's pool; a program no engine has served yet has none, and its events stay with the edge", async () => {
    await poolsFor("r11-model", "r11a", "r11b");
    const seen = fleet({ r11a: (f) => (f.request.url.endsWith("/v1/events") ? new Response(null, { status: 202 }) : poolJson()) });
    const tenant = await newTenant();
    const created = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    const idle = programHeader(created)!;
    const event = JSON.stringify({ type: "tool_started", tool: "bash", tool_call_id: "c1" });
    const post = (programId: string) =>
      tenantFetch(tenant, `/v1/programs/${programId}/events`, { method: "POST", headers: { "content-type": "application/json" }, body: event });
    expect((await post(idle)).status).toBe(202);
    await drain();
    expect(seen.filter((f) => f.request.url.endsWith("/v1/events"))).toHaveLength(0);

    const served = programHeader(await call(tenant, "r11-model"))!;
    expect((await post(served)).status).toBe(202);
    await drain();
    expect(seen.filter((f) => f.request.url.endsWith("/v1/events")).map(poolOf)).toEqual(["r11a"]);
  });
});
