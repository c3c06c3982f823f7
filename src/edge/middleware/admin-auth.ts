import { createMiddleware } from "hono/factory";
import { openAIError } from "../../protocol/errors.js";
import type { EdgeEnv } from "../context.js";
import { secretsEqual } from "../crypto.js";
import { bearerToken } from "../http/bearer.js";

/** An admin token shorter than this is refused: it could be guessed. */
export const ADMIN_TOKEN_MIN_LENGTH = 32;
/** …and so is one with fewer different characters ("aaaa…"); a random hex token of 32 has ~14. */
export const ADMIN_TOKEN_MIN_DISTINCT = 8;

/** Why a token is too weak to guard the admin API, or undefined when it is strong enough. */
export function adminTokenWeakness(token: string): string | undefined {
  if (token.length < ADMIN_TOKEN_MIN_LENGTH) {
    return `ADMIN_TOKEN has ${token.length} characters; at least ${ADMIN_TOKEN_MIN_LENGTH} are required`;
  }
  if (new Set(token).size < ADMIN_TOKEN_MIN_DISTINCT) {
    return `ADMIN_TOKEN uses fewer than ${ADMIN_TOKEN_MIN_DISTINCT} different characters`;
  }
  return undefined;
}

const STRONG_TOKEN_HINT = "Set a random one, e.g. `openssl rand -hex 32 | wrangler secret put ADMIN_TOKEN`.";

/**
 * Guards the admin API with `Authorization: Bearer <ADMIN_TOKEN>`. Without an
 * ADMIN_TOKEN the admin API is off: every call gets 403 saying so. A weak
 * ADMIN_TOKEN (adminTokenWeakness) keeps it off too, and is logged: a caller that
 * presents that very token is the operator, and is told plainly what to fix; anyone
 * else gets the same 403 as a disabled admin API, learning nothing about the token.
 */
export function adminAuth() {
  return createMiddleware<EdgeEnv>(async function adminAuth(c, next) {
    const expected = c.var.config.adminToken;
    const disabled = () =>
      openAIError(403, "The admin API is disabled on this deployment.", { code: "admin_disabled" });
    if (expected === undefined) throw disabled();
    const given = bearerToken(c.req.header("authorization"));
    const weakness = adminTokenWeakness(expected);
    if (weakness !== undefined) {
      console.error(`Admin API refused: ${weakness}. ${STRONG_TOKEN_HINT}`);
      if (given !== undefined && (await secretsEqual(given, expected))) {
        throw openAIError(403, `The admin API is disabled: ${weakness}. ${STRONG_TOKEN_HINT}`, { code: "admin_token_too_weak" });
      }
      throw disabled();
    }
    if (given === undefined || !(await secretsEqual(given, expected))) {
      throw openAIError(401, "Invalid or missing admin token. Use Authorization: Bearer <admin token>.", {
        code: "invalid_admin_token",
      });
    }
    await next();
  });
}
