import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { addPools, adminFetch, edge, expectOpenAIError, testPool } from "./support";

/* Issue 11: the pool directory's admin API (/admin/pools). D1 is shared by the file's tests: each uses its own pool IDs. */

const json = (body: unknown) => ({ body: JSON.stringify(body) });
const post = (path: string, body?: unknown) => adminFetch(path, { method: "POST", ...(body === undefined ? {} : json(body)) });
const patch = (path: string, body: unknown) => adminFetch(path, { method: "PATCH", ...json(body) });

const EU = testPool({ id: "euw-1", region: "eu-west", url: "https://eu.pool.example/agentix", models: ["b-model", "a-model", "a-model"], weight: 2.5, signing_key_id: "eu-2031" });

describe("/admin/pools", () => {
  it("adds, lists, shows and updates pools; the row in D1 holds the key's ID and no secret", async () => {
    const created = await post("/admin/pools", EU);
    expect(created.status).toBe(201);
    const view = (await created.json()) as Record<string, unknown>;
    expect(view).toEqual({
      id: "euw-1",
      object: "pool",
      region: "eu-west",
      url: "https://eu.pool.example/agentix",
      models: ["a-model", "b-model"],
      weight: 2.5,
      status: "active",
      signing_key_id: "eu-2031",
      created_at: expect.any(Number),
      updated_at: view.created_at,
      // The monitor has not read it yet.
      health: null,
    });
    await addPools(testPool({ id: "use1-a", status: "draining" }));

    const list = (await (await adminFetch("/admin/pools")).json()) as { object: string; data: Record<string, unknown>[] };
    expect(list.object).toBe("list");
    expect(list.data.filter((p) => p.id === "euw-1" || p.id === "use1-a").map((p) => [p.id, p.status, p.weight])).toEqual([
      ["euw-1", "active", 2.5],
      ["use1-a", "draining", 1],
    ]);
    expect(await (await adminFetch("/admin/pools/euw-1")).json()).toEqual(view);

    const updated = await patch("/admin/pools/euw-1", { models: ["c-model"], weight: 0.5, url: "http://10.0.0.7:8080", region: "eu-central", signing_key_id: "eu-2032" });
    expect(updated.status).toBe(200);
    expect(await updated.json()).toMatchObject({
      id: "euw-1",
      region: "eu-central",
      url: "http://10.0.0.7:8080",
      models: ["c-model"],
      weight: 0.5,
      status: "active",
      signing_key_id: "eu-2032",
      created_at: view.created_at,
    });
    const statusOnly = (await (await patch("/admin/pools/euw-1", { status: "disabled" })).json()) as Record<string, unknown>;
    expect(statusOnly).toMatchObject({ status: "disabled", models: ["c-model"], weight: 0.5 });

    const row = await env.DB.prepare("SELECT * FROM pools WHERE id = 'euw-1'").first<Record<string, unknown>>();
    expect(row).toMatchObject({ models: '["c-model"]', signing_key_id: "eu-2032", status: "disabled" });
  });

  it("drain, disable and activate set the status; an unknown pool is 404 pool_not_found", async () => {
    await addPools(testPool({ id: "p-status" }));
    for (const [action, status] of [["drain", "draining"], ["disable", "disabled"], ["activate", "active"], ["drain", "draining"]] as const) {
      const res = await post(`/admin/pools/p-status/${action}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id: "p-status", status });
    }
    expect(await (await adminFetch("/admin/pools/p-status")).json()).toMatchObject({ status: "draining" });

    for (const res of [
      await adminFetch("/admin/pools/nope"),
      await patch("/admin/pools/nope", { weight: 2 }),
      await post("/admin/pools/nope/drain"),
    ]) {
      const error = await expectOpenAIError(res, 404, "not_found_error");
      expect(error.error).toMatchObject({ code: "pool_not_found", param: "pool_id" });
    }
    const unknownAction = await post("/admin/pools/p-status/delete");
    expect((await expectOpenAIError(unknownAction, 404)).error.code).toBe("unknown_route");
  });

  it("refuses an existing id with 409 pool_exists and leaves the pool as it was", async () => {
    await addPools(testPool({ id: "p-dup" }));
    const again = await post("/admin/pools", testPool({ id: "p-dup", region: "eu-west" }));
    expect((await expectOpenAIError(again, 409)).error).toMatchObject({ code: "pool_exists", param: "id" });
    expect(await (await adminFetch("/admin/pools/p-dup")).json()).toMatchObject({ region: "us-east" });
  });

  it("validates every field: 400 in OpenAI's shape naming it", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ id: "Pool One" }, "id"],
      [{ region: "US East" }, "region"],
      [{ url: "ftp://pool.example" }, "url"],
      [{ url: "https://pool.example/" }, "url"],
      [{ url: "https://user:pw@pool.example" }, "url"],
      [{ url: "https://pool.example?x=1" }, "url"],
      [{ url: "pool.example" }, "url"],
      [{ models: [] }, "models"],
      [{ models: ["a b"] }, "models.0"],
      [{ models: ["ok", "no,comma"] }, "models.1"],
      [{ weight: 0 }, "weight"],
      [{ weight: -1 }, "weight"],
      [{ status: "paused" }, "status"],
      [{ signing_key_id: "" }, "signing_key_id"],
      [{ signing_key_id: "a/b" }, "signing_key_id"],
      [{ signing_secret: "s3cret-s3cret-s3cret" }, "signing_secret"],
    ];
    for (const [change, param] of cases) {
      const res = await post("/admin/pools", { ...testPool({ id: "p-valid" }), ...change });
      const error = await expectOpenAIError(res, 400, "invalid_request_error");
      expect(error.error.param, JSON.stringify(change)).toBe(param);
    }
    const { region: _region, ...noRegion } = testPool({ id: "p-valid" });
    expect((await expectOpenAIError(await post("/admin/pools", noRegion), 400)).error.param).toBe("region");
    expect((await adminFetch("/admin/pools/p-valid")).status).toBe(404);

    await addPools(testPool({ id: "p-valid" }));
    expect((await expectOpenAIError(await patch("/admin/pools/p-valid", { weight: 0 }), 400)).error.param).toBe("weight");
    expect((await expectOpenAIError(await patch("/admin/pools/p-valid", { id: "p2" }), 400)).error.param).toBe("id");
    await expectOpenAIError(await patch("/admin/pools/p-valid", {}), 400);
  });

  it("needs the admin token", async () => {
    const anonymous = await edge("/admin/pools");
    await expectOpenAIError(anonymous, 401);
    const wrong = await edge("/admin/pools", { method: "POST", headers: { authorization: "Bearer agx_not-the-admin-token" }, ...json(testPool({ id: "p-auth" })) });
    await expectOpenAIError(wrong, 401);
    expect((await adminFetch("/admin/pools/p-auth")).status).toBe(404);
  });
});
