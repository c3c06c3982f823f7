import { type Context, Hono } from "hono";
import { openAIError } from "../../protocol/errors.js";
import type { EdgeEnv } from "../context.js";
import { type CallableModel, callableModels } from "../pools/directory.js";
import { poolSnapshot } from "../pools/directory-cache.js";

/** Who a model object names as its owner. */
export const MODEL_OWNER = "agentix";

/** OpenAI's answer to a model that does not exist or the caller may not use (as the pool's). */
export const modelNotFound = (model: string) =>
  openAIError(404, `The model ${JSON.stringify(model.slice(0, 100))} does not exist or you do not have access to it`, {
    type: "invalid_request_error",
    code: "model_not_found",
    param: "model",
  });

/** OpenAI's model object; `created` in seconds: when the first pool still serving it was added. */
const modelView = (m: CallableModel) => ({
  id: m.id,
  object: "model" as const,
  created: Math.floor(m.createdAt / 1000),
  owned_by: MODEL_OWNER,
});

/**
 * GET /v1/models and /v1/models/{model}: the models the authenticated tenant may
 * call, i.e. allowed by its plan and served by an active or draining pool in a region
 * its plan allows. The directory is the pool monitor's (at most about a second old).
 */
export function modelRoutes() {
  const routes = new Hono<EdgeEnv>();

  const tenantModels = async (c: Context<EdgeEnv>) =>
    callableModels((await poolSnapshot(c.env, (work) => c.executionCtx.waitUntil(work))).pools, c.var.tenant.modelAccess);

  routes.get("/", async (c) => c.json({ object: "list" as const, data: (await tenantModels(c)).map(modelView) }));

  // Model names may hold slashes ("org/model"), as OpenAI's fine-tune IDs hold colons.
  routes.get("/:model{.+}", async (c) => {
    const model = c.req.param("model");
    const found = (await tenantModels(c)).find((m) => m.id === model);
    if (!found) throw modelNotFound(model);
    return c.json(modelView(found));
  });

  return routes;
}
