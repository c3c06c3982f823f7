import type { ThreadContext } from "./context-generation.js";

/*
 * Merged branches, seen at the edge (issue 13), pure. An agent that forks a branch off a
 * thread and later takes the branch's work back into the thread sends, on the thread, a
 * conversation that contains the branch's whole last call (its messages, and usually
 * its reply and what followed). That call merged the branch: the branch's context is
 * not the one the agent goes on with, so it may be evicted first (a thread_ended hint,
 * outcome "merged").
 *
 * The rule, for each open fork of the calling thread: the call's messages extend the
 * fork's last call's messages (its prefix hash at that length matches, and the call
 * is longer), the fork had more messages than the thread's own previous call (so it
 * did work the thread had not seen; a fork that only repeated its parent is not
 * merged by the parent's next turn), and no call of the fork is in flight.
 *
 * Why it is safe: whatever the drop could evict is KV the merging call itself read (its
 * prompt contains the fork's last call whole), and the edge sends it only once that call
 * has completed, when those blocks carry the calling thread's tag as well; a block is
 * dropped only when every context on it is (sim/kv-retention-index.ts). What is left
 * to go first is the fork's own tail beyond it. A fork called again after all reopens
 * at a new generation (the program's object marks it ended) and reads the blocks it
 * shares with the thread as before.
 */

export interface OpenBranch {
  name: string;
  /** The branch's context after its last call. */
  context: ThreadContext;
  /** Its calls in flight now. */
  inFlight: number;
}

/** The open forks of the calling thread that a call with these prefix hashes merged; `previous`: the calling thread's context before the call. */
export function mergedBranches(previous: ThreadContext, forks: readonly OpenBranch[], hashes: readonly string[]): OpenBranch[] {
  return forks.filter(
    (fork) =>
      fork.inFlight === 0 &&
      fork.context.messages > previous.messages &&
      hashes.length > fork.context.messages &&
      hashes[fork.context.messages - 1] === fork.context.hash,
  );
}
