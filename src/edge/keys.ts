import { randomToken } from "../protocol/ids.js";
import { sha256Hex } from "./crypto.js";

/*
 * Tenant API keys: `agx_` and 40 base62 characters (~238 bits). Only the
 * SHA-256 hex of a key and its display prefix are stored; the key itself is
 * shown once, when it is created.
 */

export const API_KEY_PATTERN = /^agx_[0-9A-Za-z]{40}$/;
const DISPLAY_PREFIX_LENGTH = 12;

export interface NewApiKey {
  key: string;
  hash: string;
  prefix: string;
}

export async function newApiKey(): Promise<NewApiKey> {
  const key = `agx_${randomToken(40)}`;
  return { key, hash: await hashApiKey(key), prefix: key.slice(0, DISPLAY_PREFIX_LENGTH) };
}

export function hashApiKey(key: string): Promise<string> {
  return sha256Hex(key);
}
