import { z } from "zod";
import { THREAD_NAME } from "./ids.js";
import { THREAD_END_OUTCOMES } from "./threads.js";

/*
 * KV hints: what the edge knows of a program's contexts that the pool cannot see
 * itself, sent as a signed `POST /v1/kv-hints` (like a tool-event batch: the program in
 * the signed fields, a fresh batch ID as `call` for the replay guard). The pool's
 * retention planner (core/kv/retention-planner.ts) turns them into keep / normal / drop
 * hints for the engines that take them (kv-retention.ts).
 *
 * The edge knows two such things: the program is over (DELETE /v1/programs/{id}, or it
 * expired idle), so nothing will read its KV again; and one thread of it is over (the
 * agent ended it, DELETE /v1/programs/{id}/threads/{thread}: a branch abandoned or
 * merged; or a completed call on its parent took the fork's work in:
 * core/recognition/branch-merge.ts), so nothing will read that thread's context again. A compacted history needs
 * no hint of its own: the next call carries the thread's new context generation.
 *
 * Hints never change what a call is billed or where it may run.
 */

/** Hints in one request; a larger batch is refused (400), not truncated. */
export const MAX_KV_HINTS_PER_BATCH = 16;

export const PROGRAM_END_REASONS = ["ended", "expired"] as const;
export type ProgramEndReason = (typeof PROGRAM_END_REASONS)[number];

export const ProgramEndedHint = z.strictObject({
  type: z.literal("program_ended"),
  /** DELETE /v1/programs/{id} ("ended"), or the program's idle TTL ("expired"). */
  reason: z.enum(PROGRAM_END_REASONS),
});
export type ProgramEndedHint = z.infer<typeof ProgramEndedHint>;

export const ThreadEndedHint = z.strictObject({
  type: z.literal("thread_ended"),
  /** The thread's name (protocol/ids.ts THREAD_NAME). */
  thread: z.string().regex(THREAD_NAME, "thread must be 1–64 letters, digits, or . _ : -"),
  /**
   * The thread's context generation when it ended: contexts up to it are dropped, a
   * newer one (the thread reopened before this hint arrived) is left alone.
   */
  generation: z.int().nonnegative(),
  outcome: z.enum(THREAD_END_OUTCOMES),
});
export type ThreadEndedHint = z.infer<typeof ThreadEndedHint>;

export const KvHint = z.discriminatedUnion("type", [ProgramEndedHint, ThreadEndedHint]);
export type KvHint = z.infer<typeof KvHint>;

export const KvHintBatch = z.strictObject({
  hints: z.array(KvHint).min(1).max(MAX_KV_HINTS_PER_BATCH),
});
export type KvHintBatch = z.infer<typeof KvHintBatch>;

/** The pool's answer: how many hints it applied. */
export const KvHintsAccepted = z.object({ accepted: z.int().nonnegative() });
export type KvHintsAccepted = z.infer<typeof KvHintsAccepted>;
