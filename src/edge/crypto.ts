import { sha256Hex } from "../protocol/signing.js";

const encoder = new TextEncoder();

/**
 * Compares two secrets in constant time. Hashing first gives both sides the
 * same length, so neither the content nor the length of the expected value leaks.
 */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([
    crypto.subtle.digest("SHA-256", encoder.encode(given)),
    crypto.subtle.digest("SHA-256", encoder.encode(expected)),
  ]);
  return crypto.subtle.timingSafeEqual(a, b);
}

export { sha256Hex };
