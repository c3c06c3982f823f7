import { describe, expect, it } from "vitest";
import { mergedBranches, type OpenBranch } from "../../src/core/recognition/branch-merge.js";
import { FIRST_CONTEXT, nextThreadContext, type ThreadContext } from "../../src/core/recognition/context-generation.js";
import { canonicalMessage, prefixHashes } from "../../src/core/recognition/conversation-index.js";

const msg = (role: string, content: string) => canonicalMessage({ role, content });
const hashesOf = (messages: string[]) => prefixHashes("m", messages);
const contextOf = (messages: string[], from: ThreadContext = FIRST_CONTEXT) => nextThreadContext(from, hashesOf(messages));

const SYSTEM = msg("system", "You are a coding agent.");
const TASK = msg("user", "Fix the failing test.");
const PLAN = msg("assistant", "Two ideas: A and B.");
/** main's call, then a fork that tried idea A and answered. */
const MAIN = [SYSTEM, TASK];
const FORK_A = [SYSTEM, TASK, PLAN, msg("user", "Try A.")];
const fork = (messages: string[], inFlight = 0, name = "branch-a"): OpenBranch => ({ name, context: contextOf(messages, contextOf(MAIN)), inFlight });

describe("merged branches", () => {
  it("a call on the thread that contains a fork's whole last call merges that fork", () => {
    const merging = [...FORK_A, msg("assistant", "A works."), msg("user", "Good: go on with A.")];
    expect(mergedBranches(contextOf(MAIN), [fork(FORK_A)], hashesOf(merging)).map((b) => b.name)).toEqual(["branch-a"]);
  });

  it("a thread's own next turn, a sibling idea, or the fork's exact messages again merge nothing", () => {
    const nextTurn = [...MAIN, PLAN, msg("user", "Try B.")];
    expect(mergedBranches(contextOf(MAIN), [fork(FORK_A)], hashesOf(nextTurn))).toEqual([]);
    // Not longer than the fork's last call: a resend of it on the thread, not a merge.
    expect(mergedBranches(contextOf(MAIN), [fork(FORK_A)], hashesOf(FORK_A))).toEqual([]);
  });

  it("a fork with a call in flight is not merged: its work is not done", () => {
    const merging = [...FORK_A, msg("assistant", "A works.")];
    expect(mergedBranches(contextOf(MAIN), [fork(FORK_A, 1)], hashesOf(merging))).toEqual([]);
  });

  it("a fork that had no more messages than the thread already had is not merged by the thread's next turn", () => {
    // The fork only repeated main's call; main's next turn extends it, but the fork did nothing main had not seen.
    const previous = contextOf([...MAIN, PLAN]);
    const merging = [...MAIN, PLAN, msg("user", "Go on.")];
    expect(mergedBranches(previous, [fork([...MAIN, PLAN])], hashesOf(merging))).toEqual([]);
  });

  it("of two forks, only the one whose work the call contains is merged", () => {
    const forkB = fork([SYSTEM, TASK, PLAN, msg("user", "Try B.")], 0, "branch-b");
    const merging = [...FORK_A, msg("assistant", "A works.")];
    expect(mergedBranches(contextOf(MAIN), [fork(FORK_A), forkB], hashesOf(merging)).map((b) => b.name)).toEqual(["branch-a"]);
  });
});
