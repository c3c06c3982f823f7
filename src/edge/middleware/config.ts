import { createMiddleware } from "hono/factory";
import type { EdgeEnv } from "../context.js";
import { edgeConfig } from "../env.js";

/** Parses the Worker's vars (cached per Env) and exposes them as `c.var.config`. */
export function loadConfig() {
  return createMiddleware<EdgeEnv>(async function loadConfig(c, next) {
    c.set("config", edgeConfig(c.env));
    await next();
  });
}
