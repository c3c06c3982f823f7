import { randomToken } from "../protocol/ids.js";
import { sha256Hex } from "./crypto.js";

/*
 * Tenant API keys: `agx_`, 40 base62 characters (~238 bits), then `_` and the
 * tenant's ID: `agx_<secret>_ten_<16>`. The tenant in the key's text lets the edge
 * go straight to that tenant's limiter, which verifies the key's hash; nothing is
 * looked up first. Keys issued before the suffix existed (`agx_<secret>`) still work:
 * their tenant is looked up once per isolate (middleware/key-tenants.ts). Only the
 * SHA-256 hex of a key and its display prefix are stored; the key itself is shown
 * once, when it is created.
 */

export const API_KEY_PATTERN = /^agx_[0-9A-Za-z]{40}(?:_(ten_[0-9A-Za-z]{16}))?$/;
const DISPLAY_PREFIX_LENGTH = 12;

export interface NewApiKey {
  key: string;
  hash: string;
  prefix: string;
}

export async function newApiKey(tenantId: string): Promise<NewApiKey> {
  const key = `agx_${randomToken(40)}_${tenantId}`;
  if (!API_KEY_PATTERN.test(key)) throw new Error(`tenant ID ${tenantId} cannot be carried in an API key`);
  return { key, hash: await hashApiKey(key), prefix: key.slice(0, DISPLAY_PREFIX_LENGTH) };
}

/** A well-formed key's tenant, when its text names it; null for a key issued before keys carried it. Undefined: not a key. */
export function tenantNamedByKey(key: string): string | null | undefined {
  const match = API_KEY_PATTERN.exec(key);
  if (!match) return undefined;
  return match[1] ?? null;
}

export function hashApiKey(key: string): Promise<string> {
  return sha256Hex(key);
}
