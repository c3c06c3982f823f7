import type { Env } from "../env.js";
import { sendThreadEndedHints } from "./end-hints.js";
import type { ProgramSession } from "./session.js";
import type { MergedBranch } from "./types.js";

/**
 * A call that merged forks of its thread (core/recognition/branch-merge.ts) completed:
 * each fork that has not moved on since is ended as merged in the program, and the
 * pools that hold its context are sent thread_ended. Only after the call completed, so
 * the KV the merging call read carries its own thread's tag before the fork's is dropped.
 * Hints: a failure is logged; this never rejects.
 */
export async function endMergedBranches(
  env: Env,
  session: DurableObjectStub<ProgramSession>,
  program: { tenantId: string; programId: string },
  merged: readonly MergedBranch[],
  background: (work: Promise<unknown>) => void,
): Promise<void> {
  for (const branch of merged) {
    try {
      const ended = await session.endThread({
        thread: branch.thread,
        outcome: "merged",
        ifUnchanged: { messages: branch.messages, hash: branch.hash },
        now: Date.now(),
      });
      // A fork that took a call since, or a program that ended: not merged after all, or told already.
      if (!ended.ok) continue;
      const hint = { ...program, thread: branch.thread, generation: ended.generation, outcome: "merged" as const, pools: ended.servedBy };
      await sendThreadEndedHints(env, hint, background);
    } catch (error) {
      console.error(`ending merged branch ${branch.thread} of ${program.programId} failed`, error);
    }
  }
}
