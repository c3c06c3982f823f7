import { describe, expect, it } from "vitest";
import { renderPrompt, tokenize } from "../../../src/protocol/tokens.js";
import {
  appendSegmentTokens,
  callMessages,
  callPromptSegments,
  callPromptTokens,
  callSequenceSegments,
  commonPrefixTokens,
  generatePrograms,
  parseWorkload,
  type ProgramSpec,
  promptTokenCount,
  renderPromptTokens,
} from "../../../src/sim/workload/index.js";
import { loadWorkload } from "../../../src/sim/workload/load.js";

const mixedWorkload = await loadWorkload("mixed");
const mixed = generatePrograms(mixedWorkload, { count: 60 });
const ofKind = (kind: string): ProgramSpec => {
  const program = mixed.find((p) => p.kind === kind);
  if (program === undefined) throw new Error(`no ${kind} program`);
  return program;
};

function sharedTokens(a: readonly string[], b: readonly string[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe("prompt rendering", () => {
  it("renders exactly promptTokenCount tokens of 4 characters", () => {
    for (const program of mixed.slice(0, 20)) {
      for (const call of program.calls.slice(0, 10)) {
        const tokens = callPromptTokens(program, call);
        expect(tokens).toHaveLength(promptTokenCount(call));
        expect(tokens.every((t) => t.length === 4)).toBe(true);
        // The same tokens a real client's text would give (src/protocol/tokens.ts).
        expect(tokenize(tokens.join(""))).toEqual(tokens);
      }
    }
  });

  it("makes a chain call's prompt start with the previous call's prompt and output", () => {
    const chat = ofKind("chat");
    for (let i = 1; i < chat.calls.length; i++) {
      const previous = chat.calls[i - 1];
      const call = chat.calls[i];
      if (previous === undefined || call === undefined) throw new Error("missing call");
      const before = appendSegmentTokens([], callSequenceSegments(chat, previous));
      const prompt = callPromptTokens(chat, call);
      expect(prompt.slice(0, before.length)).toEqual(before);
      expect(before).toHaveLength(call.systemPromptTokens + call.contextTokens);
    }
  });

  it("is deterministic and keeps programs apart except for the shared system prompt", () => {
    const [a, b] = mixed.filter((p) => p.kind === "function-calling");
    if (a === undefined || b === undefined) throw new Error("need two function-calling programs");
    const again = generatePrograms(parseWorkload(JSON.parse(JSON.stringify(mixedWorkload))), { count: 60 });
    expect(callPromptTokens(again[a.index] as ProgramSpec, a.calls[1] as never)).toEqual(callPromptTokens(a, a.calls[1] as never));
    const ta = callPromptTokens(a, a.calls[0] as never);
    const tb = callPromptTokens(b, b.calls[0] as never);
    const system = a.calls[0]?.systemPromptTokens ?? 0;
    expect(system).toBeGreaterThan(0);
    expect(sharedTokens(ta, tb)).toBe(system);
    // Other kinds have another system prompt.
    const tree = ofKind("tree-search");
    expect(sharedTokens(ta, callPromptTokens(tree, tree.calls[0] as never))).toBe(0);
  });

  it("measures shared prefixes on segments exactly as on tokens", () => {
    const tree = ofKind("tree-search");
    const calls = tree.calls.slice(0, 40);
    for (const x of calls) {
      for (const y of calls.slice(0, 12)) {
        const bySegments = commonPrefixTokens(callPromptSegments(tree, x), callSequenceSegments(tree, y));
        const byTokens = sharedTokens(callPromptTokens(tree, x), appendSegmentTokens([], callSequenceSegments(tree, y)));
        expect(bySegments).toBe(byTokens);
      }
    }
    // Siblings of one expansion are sampled from one prompt: they share all of it.
    const [first, second] = tree.calls.slice(5, 7);
    if (first === undefined || second === undefined) throw new Error("missing calls");
    expect(second.samePromptAs).toBe(first.callId);
    expect(commonPrefixTokens(callPromptSegments(tree, first), callPromptSegments(tree, second))).toBe(promptTokenCount(first));
    expect(callPromptTokens(tree, second)).toEqual(callPromptTokens(tree, first));
    // Their outputs differ, so their children's contexts part there.
    expect(commonPrefixTokens(callSequenceSegments(tree, first), callSequenceSegments(tree, second))).toBe(promptTokenCount(first));
  });

  it("renders incrementally from an earlier prompt with the same result", () => {
    for (const program of [ofKind("tree-search"), ofKind("coding-agent"), ofKind("function-calling")]) {
      const calls = program.calls.slice(0, 30);
      for (const [i, call] of calls.entries()) {
        const earlierCall = calls[Math.max(0, i - 1 - (i % 3))];
        if (earlierCall === undefined) throw new Error("missing call");
        const earlier = { segments: callPromptSegments(program, earlierCall), tokens: callPromptTokens(program, earlierCall) };
        expect(renderPromptTokens(callPromptSegments(program, call), earlier)).toEqual(callPromptTokens(program, call));
      }
    }
  });

  it("renders chat messages whose prompts grow by prefix and count about the call's tokens", () => {
    const program = ofKind("coding-agent");
    let previousText = "";
    for (const call of program.calls.slice(0, 12)) {
      const messages = callMessages(program, call);
      const text = renderPrompt({ messages });
      expect(Math.abs(Math.ceil(text.length / 4) - promptTokenCount(call))).toBeLessThanOrEqual(messages.length * 6);
      if (call.callId > 0) {
        // The earlier call's messages are a prefix of this one's (no compaction this early).
        expect(text.startsWith(previousText)).toBe(true);
      }
      previousText = text;
    }
    expect(callMessages(program, program.calls[1] as never).map((m) => m.role)).toEqual(["system", "user", "assistant", "user"]);
  });
});
