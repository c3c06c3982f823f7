import { z } from "zod";

/*
 * KV retention between the pool and an engine that takes Agentix's hints (the simulated
 * engine; a real engine through an LMCache / SGLang HiCache plugin that reads the same
 * shape). The pool tags each call's KV with the context it belongs to (a program's
 * thread at one context generation) and later tells the engine how to rank that context
 * for eviction: keep it through a predicted tool wait, treat it as any other again, or
 * drop it first because the program replaced or ended it.
 *
 * Durations, never instants: the engine's clock is its own (the simulator runs time-scaled).
 */

/** Where an engine that takes hints accepts them (POST, JSON `KvRetentionBatch`). */
export const KV_RETENTION_PATH = "/agentix/kv/retention";
/** The request body field that carries a call's retention tag to such an engine. */
export const KV_RETENTION_TAG_FIELD = "agentix_kv_tag";

/** Hints in one request; a larger batch is refused (400), not truncated. */
export const MAX_KV_RETENTION_HINTS = 256;
/** Five minutes: a keep longer than this is a prediction gone wrong, not a tool wait. */
export const MAX_KV_KEEP_MS = 300_000;

/** KvRetentionTag's one rule: a string passes it exactly when it matches (isKvRetentionTag). */
const KV_RETENTION_TAG = /^[A-Za-z0-9._:-]{1,160}$/;
/** A context's tag: opaque to the engine, at most 160 characters of [A-Za-z0-9._:-]. */
export const KvRetentionTag = z.string().regex(KV_RETENTION_TAG, "tag must be 1–160 letters, digits, or . _ : -");
/** KvRetentionTag.safeParse(tag).success, without zod's parse (a tag is made for every call sent to an engine that takes hints). */
export const isKvRetentionTag = (tag: string): boolean => KV_RETENTION_TAG.test(tag);

export const KvRetentionHint = z.discriminatedUnion("action", [
  /** Rank the context's blocks above recency for `keep_ms` from receipt (a predicted tool wait). */
  z.strictObject({ action: z.literal("keep"), tag: KvRetentionTag, keep_ms: z.number().positive().max(MAX_KV_KEEP_MS) }),
  /** Rank it by recency again (the program came back; a keep is withdrawn). */
  z.strictObject({ action: z.literal("normal"), tag: KvRetentionTag }),
  /** Evict it before any other context, even one used a moment ago (replaced, abandoned, ended). */
  z.strictObject({ action: z.literal("drop"), tag: KvRetentionTag }),
]);
export type KvRetentionHint = z.infer<typeof KvRetentionHint>;

export const KvRetentionBatch = z.strictObject({
  hints: z.array(KvRetentionHint).min(1).max(MAX_KV_RETENTION_HINTS),
});
export type KvRetentionBatch = z.infer<typeof KvRetentionBatch>;

/** The engine's answer: how many hints named a context it holds blocks of. */
export const KvRetentionAccepted = z.strictObject({ applied: z.int().nonnegative() });
export type KvRetentionAccepted = z.infer<typeof KvRetentionAccepted>;
