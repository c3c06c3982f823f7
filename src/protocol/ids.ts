/*
 * Opaque random identifiers. Program IDs are shown to clients; they carry no
 * tenant information, so a guessed or foreign ID reveals nothing.
 */

const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

export function randomToken(length: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(length));
  // 256 % 62 bias is < 2 %, irrelevant for identifiers; keys use more length.
  return Array.from(bytes, (b) => ALPHABET[b % ALPHABET.length]).join("");
}

export const PROGRAM_ID = /^prog_[0-9A-Za-z]{8,64}$/;
export const THREAD_NAME = /^[\w.:-]{1,64}$/;

export const newProgramId = (): string => `prog_${randomToken(24)}`;
export const newCallId = (): string => `call_${randomToken(24)}`;
/** One forwarded batch of tool events; the pool's replay guard keys on it as on a call ID. */
export const newEventBatchId = (): string => `evt_${randomToken(24)}`;
/** One batch of KV hints (protocol/kv-hints.ts), for the pool's replay guard. */
export const newKvHintBatchId = (): string => `kvh_${randomToken(24)}`;
/** A status request's ID (the pool's replay check needs one per request). */
export const newStatusProbeId = (): string => `probe_${randomToken(24)}`;
export const newTokenCountId = (): string => `count_${randomToken(24)}`;
export const newTenantId = (): string => `ten_${randomToken(16)}`;
export const newKeyId = (): string => `key_${randomToken(16)}`;
