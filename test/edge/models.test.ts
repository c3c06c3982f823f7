import { describe, expect, it } from "vitest";
import { addPools, adminFetch, edge, expectOpenAIError, newPlan, newTenant, setPlan, tenantFetch, testPool } from "./support";

/*
 * Issue 11: GET /v1/models and /v1/models/{model}: what the tenant may call (its
 * plan's models and regions) and some active or draining pool serves. D1 is shared by
 * the file's tests: each uses its own pool IDs and model names.
 */

interface ModelList {
  object: string;
  data: { id: string; object: string; created: number; owned_by: string }[];
}

const modelIds = async (res: Response) => {
  expect(res.status).toBe(200);
  const body = (await res.json()) as ModelList;
  expect(body.object).toBe("list");
  return body.data.map((m) => m.id);
};

async function expectModelNotFound(res: Response, model: string) {
  const error = await expectOpenAIError(res, 404, "invalid_request_error");
  expect(error.error).toMatchObject({ code: "model_not_found", param: "model" });
  expect(error.error.message).toBe(`The model ${JSON.stringify(model)} does not exist or you do not have access to it`);
}

describe("GET /v1/models", () => {
  it("lists the models active and draining pools serve, once each, sorted, in OpenAI's shape; not a disabled pool's", async () => {
    const before = Date.now();
    await addPools(
      testPool({ id: "m1-a", models: ["m1/llama-8b", "m1-qwen"] }),
      testPool({ id: "m1-b", models: ["m1-qwen", "m1-mistral"], status: "draining", region: "eu-west" }),
      testPool({ id: "m1-c", models: ["m1-gone"], status: "disabled" }),
    );
    const tenant = await newTenant();
    const res = await tenantFetch(tenant, "/v1/models");
    expect(res.status).toBe(200);
    const body = (await res.json()) as ModelList;
    const mine = body.data.filter((m) => m.id.startsWith("m1"));
    expect(mine.map((m) => m.id)).toEqual(["m1-mistral", "m1-qwen", "m1/llama-8b"]);
    for (const model of mine) {
      expect(Object.keys(model)).toEqual(["id", "object", "created", "owned_by"]);
      expect(model).toMatchObject({ object: "model", owned_by: "agentix" });
      // Seconds, as OpenAI's: when the first pool serving it was added.
      expect(model.created).toBeGreaterThanOrEqual(Math.floor(before / 1000));
      expect(model.created).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    }
    expect(body.data.map((m) => m.id)).toEqual([...body.data.map((m) => m.id)].sort());

    const one = await tenantFetch(tenant, "/v1/models/m1/llama-8b");
    expect(one.status).toBe(200);
    expect(await one.json()).toEqual(mine.find((m) => m.id === "m1/llama-8b"));
    expect((await tenantFetch(tenant, "/v1/models/m1%2Fllama-8b")).status).toBe(200);
    expect(await (await tenantFetch(tenant, "/v1/models/m1-mistral")).json()).toMatchObject({ id: "m1-mistral" });

    await expectModelNotFound(await tenantFetch(tenant, "/v1/models/m1-gone"), "m1-gone");
    await expectModelNotFound(await tenantFetch(tenant, "/v1/models/no-such-model"), "no-such-model");
  });

  it("follows the directory from the next request: a disabled pool's models go, an activated one's come back", async () => {
    await addPools(testPool({ id: "m2-a", models: ["m2-model"] }));
    const tenant = await newTenant();
    expect(await modelIds(await tenantFetch(tenant, "/v1/models"))).toContain("m2-model");
    expect((await adminFetch("/admin/pools/m2-a/disable", { method: "POST" })).status).toBe(200);
    expect(await modelIds(await tenantFetch(tenant, "/v1/models"))).not.toContain("m2-model");
    await expectModelNotFound(await tenantFetch(tenant, "/v1/models/m2-model"), "m2-model");
    expect((await adminFetch("/admin/pools/m2-a/activate", { method: "POST" })).status).toBe(200);
    expect((await tenantFetch(tenant, "/v1/models/m2-model")).status).toBe(200);
  });

  it("shows a tenant only its plan's models, served in its plan's regions (data residency)", async () => {
    await addPools(
      testPool({ id: "m3-us", region: "us-east", models: ["m3-big", "m3-small", "m3-us-only"] }),
      testPool({ id: "m3-eu", region: "eu-west", models: ["m3-big", "m3-small"] }),
      testPool({ id: "m3-eu-off", region: "eu-west", models: ["m3-eu-disabled"], status: "disabled" }),
    );
    await newPlan("m3-eu-small", { allowed_models: ["m3-small", "m3-us-only", "m3-eu-disabled", "m3-nowhere"], allowed_regions: ["eu-west"] });
    await newPlan("m3-eu", { allowed_regions: ["eu-west"] });
    await newPlan("m3-models", { allowed_models: ["m3-us-only", "m3-big"] });

    const tenant = await newTenant();
    await setPlan(tenant, "m3-eu-small");
    expect(await modelIds(await tenantFetch(tenant, "/v1/models"))).toEqual(["m3-small"]);
    expect((await tenantFetch(tenant, "/v1/models/m3-small")).status).toBe(200);
    // Allowed by the plan but served only outside its regions, only by a disabled pool, or nowhere.
    for (const model of ["m3-us-only", "m3-eu-disabled", "m3-nowhere", "m3-big"]) {
      await expectModelNotFound(await tenantFetch(tenant, `/v1/models/${model}`), model);
    }

    await setPlan(tenant, "m3-eu");
    const inEu = await modelIds(await tenantFetch(tenant, "/v1/models"));
    expect(inEu.filter((m) => m.startsWith("m3"))).toEqual(["m3-big", "m3-small"]);

    await setPlan(tenant, "m3-models");
    expect(await modelIds(await tenantFetch(tenant, "/v1/models"))).toEqual(["m3-big", "m3-us-only"]);

    // Lifting the restriction applies from the next request.
    expect((await adminFetch("/admin/plans/m3-models", { method: "PATCH", body: JSON.stringify({ allowed_models: null }) })).status).toBe(200);
    expect(await modelIds(await tenantFetch(tenant, "/v1/models"))).toEqual(expect.arrayContaining(["m3-big", "m3-small", "m3-us-only"]));
  });

  it("needs a tenant key", async () => {
    await expectOpenAIError(await edge("/v1/models"), 401, "authentication_error");
    await expectOpenAIError(await edge("/v1/models/test-model", { headers: { authorization: "Bearer agx_nope" } }), 401, "authentication_error");
  });
});
