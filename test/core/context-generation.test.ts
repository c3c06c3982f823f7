import { describe, expect, it } from "vitest";
import { FIRST_CONTEXT, nextThreadContext, type ThreadContext } from "../../src/core/recognition/context-generation.js";
import { canonicalMessage, prefixHashes } from "../../src/core/recognition/conversation-index.js";

const msg = (role: string, content: string) => canonicalMessage({ role, content });
const hashesOf = (messages: string[]) => prefixHashes("m", messages);
const SYSTEM = msg("system", "You are a coding agent.");
const TASK = msg("user", "Fix the failing test.");

/** A thread's context after each call of `calls`, from `start`. */
function after(calls: string[][], start: ThreadContext = FIRST_CONTEXT): ThreadContext[] {
  const seen: ThreadContext[] = [];
  let context = start;
  for (const call of calls) {
    context = nextThreadContext(context, hashesOf(call));
    seen.push(context);
  }
  return seen;
}

describe("context generation of a thread", () => {
  it("a normal next turn (previous messages, the reply, a tool result) keeps the generation", () => {
    const first = [SYSTEM, TASK];
    const second = [...first, msg("assistant", "Running the tests."), msg("tool", "1 failed")];
    const third = [...second, msg("assistant", "Patched."), msg("tool", "all passed")];
    expect(after([first, second, third]).map((c) => c.generation)).toEqual([0, 0, 0]);
  });

  it("a call whose history was compacted into a summary starts the next generation, and its next turn keeps that one", () => {
    const long = [SYSTEM, TASK, msg("assistant", "a"), msg("tool", "b"), msg("assistant", "c"), msg("tool", "d")];
    const compacted = [SYSTEM, msg("user", "Summary of the work so far: a, b, c, d."), msg("user", "Go on.")];
    const next = [...compacted, msg("assistant", "e"), msg("tool", "f")];
    expect(after([long, compacted, next]).map((c) => c.generation)).toEqual([0, 1, 1]);
  });

  it("a rewritten earlier message, or fewer messages than before, is a new generation too", () => {
    const first = [SYSTEM, TASK, msg("assistant", "a")];
    const edited = [SYSTEM, msg("user", "Fix the failing test, and the lint."), msg("assistant", "a"), msg("tool", "b")];
    expect(after([first, edited]).map((c) => c.generation)).toEqual([0, 1]);
    expect(after([first, [SYSTEM, TASK]]).map((c) => c.generation)).toEqual([0, 1]);
  });

  it("a resend of the same messages (a retry) is the same context", () => {
    expect(after([[SYSTEM, TASK], [SYSTEM, TASK]]).map((c) => c.generation)).toEqual([0, 0]);
  });

  it("a call without a conversation changes nothing", () => {
    const [first] = after([[SYSTEM, TASK]]);
    expect(nextThreadContext(first!, [])).toBe(first);
  });

  it("threads are independent: one compacting leaves the other's generation alone", () => {
    const base = [SYSTEM, TASK];
    let main = nextThreadContext(FIRST_CONTEXT, hashesOf(base));
    let side = nextThreadContext(FIRST_CONTEXT, hashesOf([SYSTEM, msg("user", "Review the diff.")]));
    main = nextThreadContext(main, hashesOf([SYSTEM, msg("user", "Summary.")]));
    side = nextThreadContext(side, hashesOf([SYSTEM, msg("user", "Review the diff."), msg("assistant", "ok"), msg("tool", "diff")]));
    expect([main.generation, side.generation]).toEqual([1, 0]);
  });

  it("a fork starts at its parent's context: continuing it keeps the parent's generation, replacing it starts the next", () => {
    const parentCalls = [[SYSTEM, TASK], [SYSTEM, msg("user", "Summary.")]];
    const parent = after(parentCalls).at(-1)!;
    expect(parent.generation).toBe(1);
    const continuing = nextThreadContext(parent, hashesOf([SYSTEM, msg("user", "Summary."), msg("assistant", "x"), msg("user", "try y")]));
    expect(continuing.generation).toBe(1);
    const replacing = nextThreadContext(parent, hashesOf([SYSTEM, msg("user", "Another summary.")]));
    expect(replacing.generation).toBe(2);
  });

  it("the model scopes the hashes: the same messages to another model are another context", () => {
    const first = nextThreadContext(FIRST_CONTEXT, prefixHashes("m", [SYSTEM, TASK]));
    expect(nextThreadContext(first, prefixHashes("other", [SYSTEM, TASK, msg("assistant", "a")])).generation).toBe(1);
  });
});
