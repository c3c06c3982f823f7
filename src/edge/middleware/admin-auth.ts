import { createMiddleware } from "hono/factory";
import { openAIError } from "../../protocol/errors.js";
import type { EdgeEnv } from "../context.js";
import { secretsEqual } from "../crypto.js";
import { bearerToken } from "../http/bearer.js";

/**
 * Guards the admin API with `Authorization: Bearer <ADMIN_TOKEN>`. Without an
 * ADMIN_TOKEN the admin API is off: every call gets 403 saying so.
 */
export function adminAuth() {
  return createMiddleware<EdgeEnv>(async function adminAuth(c, next) {
    const expected = c.var.config.adminToken;
    if (expected === undefined) {
      throw openAIError(403, "The admin API is disabled: set the ADMIN_TOKEN secret to enable it.", {
        code: "admin_disabled",
      });
    }
    const given = bearerToken(c.req.header("authorization"));
    if (given === undefined || !(await secretsEqual(given, expected))) {
      throw openAIError(401, "Invalid or missing admin token. Use Authorization: Bearer <ADMIN_TOKEN>.", {
        code: "invalid_admin_token",
      });
    }
    await next();
  });
}
