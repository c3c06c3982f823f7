import { describe, expect, it } from "vitest";
import { CallListBuilder } from "../../../src/sim/workload/program-spec.js";

const call = (newPromptTokens: number, samePromptAs?: number) => ({
  thread: "main",
  dependsOn: [],
  gapBeforeMs: 0,
  toolCalls: 0,
  contextCallIds: [],
  contextTokens: 0,
  newPromptTokens,
  ...(samePromptAs === undefined ? {} : { samePromptAs }),
  outputTokens: 10,
});

describe("CallListBuilder", () => {
  it("numbers calls in order and lets a call repeat an earlier call's prompt", () => {
    const builder = new CallListBuilder("sys", 100);
    expect(builder.add(call(50)).callId).toBe(0);
    const sibling = builder.add(call(50, 0));
    expect(sibling).toMatchObject({ callId: 1, samePromptAs: 0, systemPromptId: "sys", systemPromptTokens: 100 });
    expect("samePromptAs" in (builder.calls[0] ?? {})).toBe(false);
  });

  it("refuses to repeat a prompt of another length, or of a call not yet added", () => {
    const builder = new CallListBuilder("sys", 100);
    builder.add(call(50));
    expect(() => builder.add(call(60, 0))).toThrow(/samePromptAs 0/);
    expect(() => builder.add(call(50, 5))).toThrow(/samePromptAs 5/);
    expect(builder.calls).toHaveLength(1);
  });
});
