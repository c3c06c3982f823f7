import { createHash, timingSafeEqual } from "node:crypto";

/*
 * The pool's operator endpoints (/metrics, /health's detail, /tao/*) answer only to
 * `Authorization: Bearer <operatorToken>`. The comparison is constant time: both
 * sides are hashed to 32 bytes first, so neither the token's content nor its length
 * leaks through timing.
 */

export type OperatorAccess =
  /** The right token. */
  | "granted"
  /** No token, or a wrong one. */
  | "denied"
  /** The pool has no operator token: nobody is an operator. */
  | "disabled";

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;

const digest = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest();

export function operatorAccess(configuredToken: string | undefined, authorization: string | null | undefined): OperatorAccess {
  if (configuredToken === undefined) return "disabled";
  const presented = authorization ? BEARER.exec(authorization)?.[1] : undefined;
  if (presented === undefined) return "denied";
  return timingSafeEqual(digest(presented), digest(configuredToken)) ? "granted" : "denied";
}
