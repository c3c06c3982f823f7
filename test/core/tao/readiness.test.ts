import { describe, expect, it } from "vitest";
import { ReadinessPredictor, readinessErrorReport, UNKNOWN_TOOL } from "../../../src/core/tao/readiness.js";
import { DEFAULT_READINESS_SETTINGS, type ReadinessSettings } from "../../../src/core/tao/settings.js";

const settings: ReadinessSettings = { ...DEFAULT_READINESS_SETTINGS };

/** A predictor whose "bash" history holds three 2 s runs (median 2 s). */
function withBashHistory(): ReadinessPredictor {
  const predictor = new ReadinessPredictor(settings);
  for (let i = 0; i < 3; i++) {
    predictor.toolStarted({ programId: "warm", tool: "bash", at: i * 10_000 });
    predictor.toolFinished({ programId: "warm", tool: "bash", at: i * 10_000 + 2_000 });
    predictor.callArrived({ programId: "warm", at: i * 10_000 + 2_100 });
  }
  return predictor;
}

describe("precedence of evidence", () => {
  const at = 100_000;

  it("(a) an observed tool finish beats every estimate: ready at once", () => {
    const predictor = withBashHistory();
    predictor.toolStarted({ programId: "p", tool: "bash", at, expectedMs: 60_000, args: '{"command":"sleep 90"}' });
    expect(predictor.isReadySoon("p", at + 1_000)).toBe(false);
    predictor.toolFinished({ programId: "p", tool: "bash", at: at + 1_500 });
    expect(predictor.predictReadyAt("p", at + 1_500)).toMatchObject({ status: "pending", readyAt: at + 1_500, source: "tool-finished" });
    expect(predictor.isReadySoon("p", at + 1_500)).toBe(true);
  });

  it("(b) a client hint beats the arguments and history; with both hints, the earlier", () => {
    const predictor = withBashHistory();
    predictor.toolStarted({ programId: "p", tool: "bash", at, expectedMs: 300, args: '{"command":"sleep 10"}' });
    expect(predictor.predictReadyAt("p", at)).toMatchObject({ readyAt: at + 300, source: "client-hint" });
    predictor.toolStarted({ programId: "q", tool: "bash", at, expectedMs: 9_000, deadline: at + 4_000 });
    expect(predictor.predictReadyAt("q", at)).toMatchObject({ readyAt: at + 4_000, source: "client-hint" });
    predictor.toolStarted({ programId: "r", tool: "bash", at, deadline: at + 700 });
    expect(predictor.predictReadyAt("r", at)).toMatchObject({ readyAt: at + 700, source: "client-hint" });
  });

  it("(c) a sleep in the arguments beats history", () => {
    const predictor = withBashHistory();
    predictor.toolStarted({ programId: "p", tool: "bash", at, args: '{"command":"sleep 10 && ls"}' });
    expect(predictor.predictReadyAt("p", at)).toMatchObject({ readyAt: at + 10_000, source: "tool-arguments" });
  });

  it("(c) the arguments of the completed call's tool_calls count too, before any tool event", () => {
    const predictor = withBashHistory();
    predictor.callCompleted({ programId: "p", at, toolCalls: [{ tool: "python", toolCallId: "c1", args: '{"code":"import time\\ntime.sleep(0.25)"}' }] });
    expect(predictor.predictReadyAt("p", at)).toMatchObject({ readyAt: at + 250, source: "tool-arguments" });
    // A later start event for the same call keeps the arguments and restarts the clock.
    predictor.toolStarted({ programId: "p", toolCallId: "c1", at: at + 50 });
    expect(predictor.predictReadyAt("p", at + 50)).toMatchObject({ readyAt: at + 300, source: "tool-arguments" });
  });

  it("(d) the tool's history, then the history across tools", () => {
    const predictor = withBashHistory();
    predictor.toolStarted({ programId: "p", tool: "bash", at });
    expect(predictor.predictReadyAt("p", at)).toMatchObject({ readyAt: at + 2_000, source: "tool-history" });
    predictor.toolStarted({ programId: "q", tool: "browser", at });
    expect(predictor.predictReadyAt("q", at)).toMatchObject({ readyAt: at + 2_000, source: "global-history" });
  });

  it("(e) with nothing known: the 5 s fallback", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "p", tool: "bash", at });
    expect(predictor.predictReadyAt("p", at)).toMatchObject({ readyAt: at + 5_000, source: "fallback" });
    expect(predictor.isReadySoon("p", at)).toBe(false);
    expect(predictor.isReadySoon("p", at + 4_000)).toBe(true);
  });

  it("history needs minHistorySamples durations", () => {
    const predictor = new ReadinessPredictor(settings);
    for (let i = 0; i < 2; i++) {
      predictor.toolStarted({ programId: "w", tool: "bash", at: i * 10 });
      predictor.toolFinished({ programId: "w", tool: "bash", at: i * 10 + 5 });
    }
    predictor.toolStarted({ programId: "p", tool: "bash", at });
    expect(predictor.predictReadyAt("p", at).source).toBe("fallback");
  });
});

describe("staleness", () => {
  it("drops a prediction older than 30 s", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "p", tool: "build", at: 0, expectedMs: 40_000 });
    expect(predictor.predictReadyAt("p", 30_000).status).toBe("pending");
    expect(predictor.predictReadyAt("p", 30_001)).toMatchObject({ status: "expired", readyAt: 40_000 });
    // Due within the horizon at 39.5 s, but the evidence is stale: not ready.
    expect(predictor.isReadySoon("p", 39_500)).toBe(false);
    // New evidence revives it.
    predictor.toolFinished({ programId: "p", tool: "build", at: 41_000 });
    expect(predictor.isReadySoon("p", 41_000)).toBe(true);
  });

  it("an observed finish also expires 30 s later", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolFinished({ programId: "p", at: 0 });
    expect(predictor.predictReadyAt("p", 30_001).status).toBe("expired");
  });

  it("a passed prediction gets one probe, then the program is unready", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "p", tool: "t", at: 0, expectedMs: 2_000 });
    expect(predictor.isReadySoon("p", 500)).toBe(false); // due in 1.5 s
    expect(predictor.isReadySoon("p", 1_000)).toBe(true); // due in 1 s
    expect(predictor.isReadySoon("p", 2_000)).toBe(true); // due now
    expect(predictor.predictReadyAt("p", 2_500).status).toBe("probe"); // looking does not use it
    expect(predictor.isReadySoon("p", 2_500)).toBe(true); // the probe
    expect(predictor.isReadySoon("p", 2_500)).toBe(true); // same instant, same answer
    expect(predictor.predictReadyAt("p", 2_600).status).toBe("spent");
    expect(predictor.isReadySoon("p", 2_600)).toBe(false);
    expect(predictor.isReadySoon("p", 3_000)).toBe(false);
    // A new tool event is new evidence, with a new probe.
    predictor.toolStarted({ programId: "p", tool: "t", at: 4_000, expectedMs: 100 });
    expect(predictor.isReadySoon("p", 4_000)).toBe(true);
    expect(predictor.isReadySoon("p", 4_200)).toBe(true);
    expect(predictor.isReadySoon("p", 4_300)).toBe(false);
  });

  it("readySoonPrograms uses the probes like isReadySoon", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "a", at: 0, expectedMs: 100 });
    predictor.toolStarted({ programId: "b", at: 0, expectedMs: 9_000 });
    predictor.callArrived({ programId: "c", at: 0 });
    expect(predictor.readySoonPrograms(200)).toEqual(["a"]);
    expect(predictor.readySoonPrograms(300)).toEqual([]);
  });
});

describe("observations without client events", () => {
  it("the gap from completion to the next call is recorded under the tool named in tool_calls", () => {
    const predictor = new ReadinessPredictor(settings);
    for (const gap of [1_200, 1_300, 5_000]) {
      predictor.callCompleted({ programId: "p", at: 0, toolCalls: [{ tool: "web_search", args: '{"q":"x"}' }] });
      predictor.callArrived({ programId: "p", at: gap });
    }
    expect(predictor.toolEstimateMs("web_search")).toBe(1_300);
    predictor.callCompleted({ programId: "p", at: 10_000, toolCalls: [{ tool: "web_search" }] });
    expect(predictor.predictReadyAt("p", 10_000)).toMatchObject({ readyAt: 11_300, source: "tool-history" });
  });

  it("a completion without tool calls records under \"unknown\"", () => {
    const predictor = new ReadinessPredictor(settings);
    for (let i = 0; i < 3; i++) {
      predictor.callCompleted({ programId: "p", at: i * 100_000 });
      predictor.callArrived({ programId: "p", at: i * 100_000 + 700 });
    }
    expect(predictor.toolEstimateMs(UNKNOWN_TOOL)).toBe(700);
    predictor.callCompleted({ programId: "q", at: 0 });
    expect(predictor.predictReadyAt("q", 0)).toMatchObject({ readyAt: 700, source: "tool-history" });
  });

  it("an explicit start replaces the unknown placeholder", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.callCompleted({ programId: "p", at: 0 });
    predictor.toolStarted({ programId: "p", tool: "bash", at: 10, expectedMs: 200 });
    expect(predictor.predictReadyAt("p", 10)).toMatchObject({ readyAt: 210, source: "client-hint" });
  });

  it("a program waits for all its tools: the latest prediction, then the last finish", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.callCompleted({
      programId: "p",
      at: 0,
      toolCalls: [
        { tool: "bash", toolCallId: "a", args: "sleep 1" },
        { tool: "bash", toolCallId: "b", args: "sleep 3" },
      ],
    });
    expect(predictor.predictReadyAt("p", 0)).toMatchObject({ readyAt: 3_000, source: "tool-arguments" });
    predictor.toolFinished({ programId: "p", toolCallId: "b", at: 2_000 });
    expect(predictor.predictReadyAt("p", 2_000)).toMatchObject({ readyAt: 1_000 });
    predictor.toolFinished({ programId: "p", toolCallId: "a", at: 2_500 });
    expect(predictor.predictReadyAt("p", 2_500)).toMatchObject({ status: "pending", readyAt: 2_500, source: "tool-finished" });
  });

  it("while a call is with the pool the program is in-call, not ready soon", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.callArrived({ programId: "p", at: 0 });
    expect(predictor.predictReadyAt("p", 0).status).toBe("in-call");
    expect(predictor.isReadySoon("p", 0)).toBe(false);
    expect(predictor.predictReadyAt("nobody", 0).status).toBe("unknown");
  });
});

describe("error report", () => {
  it("mean absolute error and share within 0.5 s", () => {
    const report = readinessErrorReport([
      { predictedAt: 0, actualAt: 400 },
      { predictedAt: 1_000, actualAt: 1_600 },
      { predictedAt: 2_000, actualAt: 2_000 },
    ]);
    expect(report.count).toBe(3);
    expect(report.meanAbsErrorMs).toBeCloseTo(1_000 / 3);
    expect(report.withinToleranceShare).toBeCloseTo(2 / 3);
    expect(readinessErrorReport([]).count).toBe(0);
    expect(Number.isNaN(readinessErrorReport([]).meanAbsErrorMs)).toBe(true);
  });

  it("the predictor tallies its own predictions per source when calls arrive", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "p", at: 0, expectedMs: 1_000 });
    predictor.callArrived({ programId: "p", at: 1_200 });
    predictor.toolStarted({ programId: "p", at: 2_000 });
    predictor.callArrived({ programId: "p", at: 4_000 });
    const accuracy = predictor.accuracy();
    expect(accuracy["client-hint"]).toEqual({ count: 1, meanAbsErrorMs: 200, withinToleranceShare: 1 });
    expect(accuracy.fallback).toEqual({ count: 1, meanAbsErrorMs: 3_000, withinToleranceShare: 0 });
    expect(accuracy.all).toEqual({ count: 2, meanAbsErrorMs: 1_600, withinToleranceShare: 0.5 });
  });
});

describe("bad input and housekeeping", () => {
  it("rejects malformed events without changing state", () => {
    const predictor = new ReadinessPredictor(settings);
    expect(() => predictor.toolStarted({ programId: "", at: 0 })).toThrow(TypeError);
    expect(() => predictor.toolStarted({ programId: "p", at: Number.NaN })).toThrow(RangeError);
    expect(() => predictor.toolStarted({ programId: "p", at: 0, expectedMs: -1 })).toThrow(/expectedMs/);
    expect(() => predictor.toolStarted({ programId: "p", at: 0, deadline: Number.POSITIVE_INFINITY })).toThrow(/deadline/);
    expect(() => predictor.callCompleted({ programId: "p", at: 0, toolCalls: "x" as never })).toThrow(/toolCalls/);
    expect(predictor.programCount).toBe(0);
    expect(() => new ReadinessPredictor({ ...settings, maxPredictionAgeMs: 0 })).toThrow(/maxPredictionAgeMs/);
  });

  it("prune drops expired and idle programs; forget drops one", () => {
    const predictor = new ReadinessPredictor(settings);
    predictor.toolStarted({ programId: "old", at: 0 });
    predictor.toolStarted({ programId: "new", at: 50_000 });
    predictor.callArrived({ programId: "busy", at: 0 });
    expect(predictor.prune(50_000)).toBe(1);
    expect(predictor.predictReadyAt("old", 50_000).status).toBe("unknown");
    predictor.forget("new");
    expect(predictor.programCount).toBe(1);
  });

  it("keeps at most maxTools tool histories", () => {
    const predictor = new ReadinessPredictor({ ...settings, maxTools: 2, minHistorySamples: 1 });
    for (const tool of ["a", "b", "c"]) {
      predictor.toolStarted({ programId: "p", tool, at: 0 });
      predictor.toolFinished({ programId: "p", tool, at: 10 });
    }
    expect(predictor.toolEstimateMs("a")).toBeUndefined();
    expect(predictor.toolEstimateMs("c")).toBe(10);
  });
});

describe("bounded state", () => {
  it("keeps at most 64 tool runs per phase", () => {
    const predictor = new ReadinessPredictor(DEFAULT_READINESS_SETTINGS);
    for (let i = 0; i < 100; i++) predictor.toolStarted({ programId: "p", toolCallId: `c${i}`, at: i, expectedMs: i < 36 ? 1_000_000 : 10 });
    // The 36 long runs started first were dropped; the latest 64 are all short.
    expect(predictor.predictReadyAt("p", 100).readyAt).toBe(109);
  });
});
