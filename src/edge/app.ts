import { Hono } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { openAIErrorResponse } from "../protocol/errors.js";
import { Header } from "../protocol/headers.js";
import type { EdgeEnv } from "./context.js";
import { ConfigError } from "./env.js";
import { countingIo, forwardedIoHeader } from "./instrument/io-counts.js";
import { loadConfig } from "./middleware/config.js";
import { anthropicShape } from "./middleware/anthropic-shape.js";
import { tenantAuth } from "./middleware/tenant-auth.js";
import { adminRoutes } from "./routes/admin.js";
import { callRoutes, isModelCall } from "./routes/calls.js";
import { modelRoutes } from "./routes/models.js";
import { openApiRoutes } from "./routes/openapi.js";
import { programRoutes } from "./routes/programs.js";
import { toolEventRoutes } from "./routes/tool-events.js";
import { usageRoutes } from "./routes/usage.js";

/** The edge Worker's HTTP surface. Every error leaves in OpenAI's shape. */
export function createApp() {
  const app = new Hono<EdgeEnv>();

  app.get("/health", (c) => c.json({ ok: true }));
  // The OpenAPI document and its rendered reference: public (src/edge/openapi/).
  app.route("/", openApiRoutes());

  app.use("/admin/*", loadConfig());
  app.route("/admin", adminRoutes());

  // Anthropic's clients get Anthropic's error shape, auth refusals included: before auth.
  app.use("/v1/messages", anthropicShape());
  app.use("/v1/messages/*", anthropicShape());
  // bench:edge only (COUNT_IO=1): what a call cost before it reached a pool.
  app.use("/v1/*", async (c, next) => {
    await next();
    const counts = countingIo(c.env) ? forwardedIoHeader(c.env) : undefined;
    if (counts === undefined) return;
    c.res = new Response(c.res.body, c.res);
    c.res.headers.set(Header.ioCounts, counts);
  });
  app.use("/v1/*", loadConfig(), tenantAuth({ verifiedAtAdmission: isModelCall }));
  app.route("/v1", callRoutes());
  app.route("/v1/models", modelRoutes());
  app.route("/v1/programs", programRoutes());
  app.route("/v1/programs", toolEventRoutes());
  app.route("/v1/usage", usageRoutes());

  app.notFound((c) =>
    openAIErrorResponse(404, `Unknown route: ${c.req.method} ${new URL(c.req.url).pathname}`, {
      code: "unknown_route",
    }),
  );

  app.onError((error, c) => {
    if (error instanceof HTTPException) {
      // Ours (openAIError) already carry an OpenAI-shaped response; Hono's own do not.
      if (error.res) return error.getResponse();
      return openAIErrorResponse(error.status as ContentfulStatusCode, error.message || "Request failed");
    }
    if (error instanceof ConfigError) {
      console.error(error.message);
      return openAIErrorResponse(500, error.message, { code: "edge_misconfigured" });
    }
    console.error(`Unhandled error on ${c.req.method} ${c.req.path}`, error);
    return openAIErrorResponse(500, "Internal error.", { code: "internal_error" });
  });

  return app;
}
