import { describe, expect, it } from "vitest";
import { canonicalMessage, ConversationIndex } from "../../src/core/recognition/conversation-index.js";

/*
 * Program recognition without a header (issue 12): continuation, fork, retry, and the
 * adversarial cases where content alone must not merge two agents.
 */

const sys = canonicalMessage({ role: "system", content: "You are a coding agent." });
const user = (text: string) => canonicalMessage({ role: "user", content: text });
const reply = (text: string, calls: { name: string; arguments: string }[] = []) =>
  canonicalMessage({ role: "assistant", content: text, tool_calls: calls.map((c, i) => ({ id: `call_${i}`, type: "function", function: c })) });
const tool = (text: string) => canonicalMessage({ role: "tool", content: text, tool_call_id: "call_0" });

const M = "model-a";

/** Plays one call the way the edge does: recognise, record, then its reply (or failure). */
function play(index: ConversationIndex, messages: string[], answer: string | "fail", now: number, fresh: () => string) {
  const found = index.recognize(M, messages, now);
  const programId = found?.programId ?? fresh();
  const thread = found?.thread ?? "main";
  index.recordCall(M, messages, programId, thread, now);
  if (answer === "fail") index.recordFailure(M, messages, programId, thread, now + 1);
  else index.recordReply(M, messages, answer, programId, thread, now + 1);
  return { programId, thread, how: found?.how ?? "new" };
}

function newIds() {
  let n = 0;
  return () => `prog_${String(++n).padStart(8, "0")}`;
}

describe("ConversationIndex", () => {
  it("follows a sequential agent loop: every call after the first continues the program on its thread", () => {
    const index = new ConversationIndex();
    const fresh = newIds();
    const history = [sys, user("Fix the failing test.")];
    const seen = [];
    for (let step = 0; step < 6; step++) {
      const r = reply(`step ${step}`, [{ name: "bash", arguments: `{"cmd":"ls ${step}"}` }]);
      seen.push(play(index, [...history], r, step * 10, fresh));
      history.push(r, tool(`output ${step}`));
    }
    expect(seen.map((s) => s.programId)).toEqual(Array(6).fill("prog_00000001"));
    expect(seen.map((s) => s.how)).toEqual(["new", "continuation", "continuation", "continuation", "continuation", "continuation"]);
    expect(new Set(seen.map((s) => s.thread))).toEqual(new Set(["main"]));
  });

  it("never merges two agents whose first messages are identical: only a reply links calls", () => {
    const index = new ConversationIndex();
    const fresh = newIds();
    const first = [sys, user("Fix the failing test.")];
    const a = play(index, first, reply("I will look at the tests."), 0, fresh);
    const b = play(index, first, reply("Let me run them first."), 1, fresh);
    expect(a.programId).not.toBe(b.programId);
    // Each continues its own.
    const a2 = play(index, [...first, reply("I will look at the tests."), user("ok")], reply("done"), 2, fresh);
    const b2 = play(index, [...first, reply("Let me run them first."), user("ok")], reply("done"), 3, fresh);
    expect([a2.programId, b2.programId]).toEqual([a.programId, b.programId]);
  });

  it("treats an identical re-send of a failed call as a retry, and of an answered first call as a new program", () => {
    const index = new ConversationIndex();
    const fresh = newIds();
    const first = [sys, user("Summarise the repo.")];
    const failed = play(index, first, "fail", 0, fresh);
    const retried = play(index, first, reply("It is a web app."), 5, fresh);
    expect(retried).toMatchObject({ programId: failed.programId, thread: failed.thread, how: "retry" });
    // Answered now: the same first messages again are another agent's first call.
    const other = play(index, first, reply("A CLI."), 6, fresh);
    expect(other.how).toBe("new");
    expect(other.programId).not.toBe(failed.programId);
  });

  it("makes each further expansion of a node a fork: same program, a thread of its own", () => {
    const index = new ConversationIndex();
    const fresh = newIds();
    const node = [sys, user("Solve the puzzle.")];
    const root = play(index, node, reply("Three ideas."), 0, fresh);
    const children = ["idea 1", "idea 2", "idea 3"].map((idea, i) => play(index, [...node, reply("Three ideas."), user(idea)], reply(`try ${i}`), 10 + i, fresh));
    expect(children.map((c) => c.programId)).toEqual(Array(3).fill(root.programId));
    expect(children.map((c) => c.how)).toEqual(["continuation", "fork", "fork"]);
    expect(new Set(children.map((c) => c.thread)).size).toBe(3);
    // A child's own continuation stays on the child's thread.
    const deeper = play(index, [...node, reply("Three ideas."), user("idea 3"), reply("try 2"), user("go on")], reply("ok"), 20, fresh);
    expect(deeper).toMatchObject({ programId: root.programId, thread: children[2]!.thread, how: "continuation" });
  });

  it("keys on the model, ignores tool-call IDs and argument key order, and forgets after its TTL", () => {
    const index = new ConversationIndex({ ttlMs: 1_000 });
    const fresh = newIds();
    const first = [sys, user("go")];
    const a = play(index, first, reply("", [{ name: "edit", arguments: '{"path":"a.ts","line":3}' }]), 0, fresh);
    const replayed = canonicalMessage({ role: "assistant", content: "", tool_calls: [{ id: "toolu_XYZ", type: "function", function: { name: "edit", arguments: '{"line":3, "path":"a.ts"}' } }] });
    expect(index.recognize(M, [...first, replayed, tool("ok")], 10)).toMatchObject({ programId: a.programId, how: "continuation" });
    expect(index.recognize("model-b", [...first, replayed, tool("ok")], 10)).toBeUndefined();
    expect(index.recognize(M, [...first, replayed, tool("ok")], 5_000)).toBeUndefined();
  });

  it("holds at most maxEntries, dropping the least recently used", () => {
    const index = new ConversationIndex({ maxEntries: 3 });
    const fresh = newIds();
    for (let i = 0; i < 10; i++) play(index, [sys, user(`task ${i}`)], reply(`r${i}`), i, fresh);
    expect(index.size).toBe(3);
    expect(index.recognize(M, [sys, user("task 0"), reply("r0"), user("more")], 20)).toBeUndefined();
    expect(index.recognize(M, [sys, user("task 9"), reply("r9"), user("more")], 20)).toMatchObject({ how: "continuation" });
  });
});
