import { describe, expect, it } from "vitest";
import { ConversationIndex } from "../../../src/core/recognition/conversation-index.js";
import { contingencyOf, pairCounts, pairwise } from "../../../src/cli/bench/recognition-metrics.js";
import { formatRecognitionReport, overall, parseRecognitionBenchArgs, replayTrace, runScenario } from "../../../src/cli/bench/recognition.js";
import { generateAgentTraces } from "../../../src/sim/workload/agent-traces.js";

describe("bench:recognition metrics", () => {
  it("counts pairs from the contingency table", () => {
    const table = contingencyOf(["a", "a", "a", "b", "b"], ["x", "x", "y", "y", "y"]);
    expect(table).toEqual(
      new Map([
        ["a", new Map([["x", 2], ["y", 1]])],
        ["b", new Map([["y", 2]])],
      ]),
    );
    // Truth: C(3,2) + C(2,2) = 4; assigned: C(2,2) + C(3,2) = 4; both: C(2,2) + C(1,2) + C(2,2) = 2.
    expect(pairCounts(table)).toEqual({ truth: 4, assigned: 4, both: 2 });
  });

  it("two programs merged: precision < 1, recall 1", () => {
    const s = pairwise(["a", "a", "b", "b"], ["x", "x", "x", "x"]);
    expect(s.recall).toBe(1);
    expect(s.precision).toBeCloseTo(2 / 6, 12);
  });

  it("one program split: precision 1, recall < 1", () => {
    const s = pairwise(["a", "a", "a", "a"], ["x", "x", "y", "y"]);
    expect(s.precision).toBe(1);
    expect(s.recall).toBeCloseTo(2 / 6, 12);
  });

  it("header only (every call its own program): precision 1, recall 0; a perfect assignment scores 1 and 1 whatever the labels", () => {
    expect(pairwise(["a", "a", "b"], ["1", "2", "3"])).toMatchObject({ precision: 1, recall: 0 });
    expect(pairwise(["a", "a", "b"], ["q", "q", "r"])).toMatchObject({ precision: 1, recall: 1 });
  });
});

describe("bench:recognition replay", () => {
  it("replays a clean trace through the index: every call on its agent's program", () => {
    const trace = generateAgentTraces({ agents: 20, seed: 5, failureRate: 0.1, identicalFirstShare: 0 });
    const replay = replayTrace(trace, new ConversationIndex());
    expect(pairwise(trace.calls.map((c) => c.programId), replay.assigned)).toMatchObject({ precision: 1, recall: 1 });
    expect(new Set(replay.assigned).size).toBe(20);
    expect(replay.how.filter((h) => h === "new")).toHaveLength(20);
    expect(replay.how.filter((h) => h === "retry").length).toBe(trace.calls.filter((c) => c.relation === "retry").length);
    expect(replay.peakEntries).toBeGreaterThan(0);
  });

  it("scores a scenario next to the header-only baseline and prints it", () => {
    const figures = runScenario({ name: "small", ambiguous: false, trace: { agents: 15 } }, 2, {});
    expect(figures.headerOnly).toMatchObject({ programs: figures.calls, precision: 1, recall: 0 });
    expect(figures.headerOnly.accuracy).toBeCloseTo(15 / figures.calls, 12);
    expect(figures.recognition.recall).toBeGreaterThan(0.9);
    const text = formatRecognitionReport({ command: "", seed: 2, agents: 15, index: {}, scenarios: [figures], overall: [overall("overall", [figures])], loadAverage: [0, 0, 0] });
    expect(text).toContain("small");
    expect(text).toContain("header only");
  });

  it("parses its options", () => {
    expect(parseRecognitionBenchArgs([])).toEqual({ agents: 200, seed: 1, index: {}, json: false });
    expect(parseRecognitionBenchArgs(["--agents", "50", "--seed", "9", "--json", "--max-entries", "100"])).toEqual({ agents: 50, seed: 9, index: { maxEntries: 100 }, json: true });
    expect(parseRecognitionBenchArgs(["--help"])).toBeUndefined();
    expect(() => parseRecognitionBenchArgs(["--agents", "0"])).toThrow(/--agents/);
  });
});
