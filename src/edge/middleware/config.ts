import { createMiddleware } from "hono/factory";
import { openAIError } from "../../protocol/errors.js";
import type { EdgeEnv } from "../context.js";
import { ConfigError, edgeConfig } from "../env.js";

/** What a caller learns about a misconfigured edge: no variable names, no values. */
export const MISCONFIGURED_MESSAGE = "The service is misconfigured and cannot take requests right now; its operator has been notified.";

/**
 * Parses the Worker's vars (cached per Env) and exposes them as `c.var.config`. A bad
 * or missing var is logged with its name (console.error, for the operator) and answered
 * with a generic 500 in OpenAI's shape: the caller may be anyone, and learns nothing
 * about the deployment's variables.
 */
export function loadConfig() {
  return createMiddleware<EdgeEnv>(async function loadConfig(c, next) {
    try {
      c.set("config", edgeConfig(c.env));
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      console.error(error.message);
      throw openAIError(500, MISCONFIGURED_MESSAGE, { code: "edge_misconfigured" });
    }
    await next();
  });
}
