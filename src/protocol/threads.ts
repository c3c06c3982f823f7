import { z } from "zod";

/*
 * The end of one thread (branch) of a program, as the agent says it:
 * DELETE /v1/programs/{id}/threads/{thread}. Nothing will read the thread's context
 * again, so the pools whose engines hold it may evict it first (kv-hints.ts
 * thread_ended). How it ended is the agent's word, kept on the thread and passed on;
 * both ends are handled alike today.
 */

export const THREAD_END_OUTCOMES = ["abandoned", "merged"] as const;
export type ThreadEndOutcome = (typeof THREAD_END_OUTCOMES)[number];

/** The body of DELETE /v1/programs/{id}/threads/{thread}; an empty body is `{}`. */
export const EndThreadBody = z.strictObject({
  outcome: z
    .enum(THREAD_END_OUTCOMES)
    .default("abandoned")
    .describe("abandoned: the branch's work is dropped; merged: its work was taken into another thread. Default abandoned."),
});
export type EndThreadBody = z.infer<typeof EndThreadBody>;
