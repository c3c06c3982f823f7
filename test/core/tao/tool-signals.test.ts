import { describe, expect, it } from "vitest";
import { DEFAULT_TAO_SETTINGS } from "../../../src/core/tao/settings.js";
import type { ToolEvent } from "../../../src/protocol/tool-events.js";
import { ToolSignals } from "../../../src/core/tao/tool-signals.js";

const P = "prog_signals01";

function signals() {
  const predictions: string[] = [];
  const events: string[] = [];
  const s = new ToolSignals(DEFAULT_TAO_SETTINGS, {
    onPrediction: (source) => predictions.push(source),
    onToolEvent: (type, outcome) => events.push(`${type}:${outcome}`),
  });
  return { s, predictions, events };
}

const completed = (facts: object = {}) => ({ completed: true, engineId: "e1", facts, promptTokensEstimate: 50 });
const started = (extra: Partial<ToolEvent> = {}): ToolEvent => ({ type: "tool_started", thread: "main", ...extra }) as ToolEvent;

describe("ToolSignals from the pool's own call lifecycle (no client events)", () => {
  it("predicts from the answer's tool-call arguments and scores the prediction when the next call arrives", () => {
    const { s, predictions } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 1_000, completed({ toolCalls: [{ tool: "bash", toolCallId: "call_1", args: '{"command":"sleep 2"}' }] }));
    expect(s.readiness.predictReadyAt(P, 1_000)).toMatchObject({ status: "pending", readyAt: 3_000, source: "tool-arguments" });
    expect(predictions).toEqual(["tool-arguments"]);
    // Between calls, with the context its next call re-sends (the prompt estimate: no usage reported).
    expect(s.betweenCalls()).toEqual([{ programId: P, contextTokens: 50 }]);
    s.callArrived(P, 3_100);
    expect(s.betweenCalls()).toEqual([]);
    expect(s.readiness.accuracy()["tool-arguments"]).toMatchObject({ count: 1, meanAbsErrorMs: 100 });
    s.callEnded(P, 4_000, completed({ usage: { promptTokens: 700, completionTokens: 30, cachedTokens: 650 } }));
    expect(s.betweenCalls()).toEqual([{ programId: P, contextTokens: 730 }]);
    // No tool named: the fallback guess.
    expect(s.readiness.predictReadyAt(P, 4_000)).toMatchObject({ source: "fallback", readyAt: 4_000 + DEFAULT_TAO_SETTINGS.readiness.fallbackMs });
  });

  it("feeds the cache-credit ledger with the context the engine now holds (estimate when no usage)", () => {
    const { s } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 100, completed());
    expect(s.credits.credit(P, "e1", 100)).toBe(50);
    s.callArrived(P, 200);
    s.callEnded(P, 300, completed({ usage: { promptTokens: 8_000, completionTokens: 200, cachedTokens: 0 } }));
    expect(s.credits.credit(P, "e1", 300)).toBe(8_200);
    // One half-life later, half of it.
    expect(s.credits.credit(P, "e1", 300 + DEFAULT_TAO_SETTINGS.cacheCredit.halfLifeMs)).toBeCloseTo(4_100);
  });

  it("starts a parallel program's tool phase only when its last call ends", () => {
    const { s } = signals();
    s.callArrived(P, 0);
    s.callArrived(P, 0);
    s.callEnded(P, 500, completed());
    expect(s.readiness.predictReadyAt(P, 500).status).toBe("in-call");
    s.callEnded(P, 800, completed());
    expect(s.readiness.predictReadyAt(P, 800).status).toBe("pending");
  });

  it("forgets the phase of a call that got no answer", () => {
    const { s } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 100, { completed: false, engineId: "e1", promptTokensEstimate: 50 });
    expect(s.readiness.predictReadyAt(P, 100).status).toBe("unknown");
    expect(s.credits.credit(P, "e1", 100)).toBe(0);
  });
});

describe("ToolSignals from client tool events", () => {
  it("uses the client's expected duration and carries its deadline over by its distance from the edge's timestamp", () => {
    const { s, predictions, events } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 1_000, completed());
    expect(s.toolEvents(P, [started({ tool: "bash", tool_call_id: "c1", expected_duration_ms: 400 })], 1_010, 99_000)).toBe(1);
    expect(s.readiness.predictReadyAt(P, 1_010)).toMatchObject({ readyAt: 1_410, source: "client-hint" });
    // The edge's clock reads 99,000 when the pool's reads 1,020: a deadline 3 s after the edge's stamp is 3 s from now here.
    s.toolEvents(P, [started({ tool: "make", tool_call_id: "c2", deadline: 102_000 })], 1_020, 99_000);
    expect(s.readiness.predictReadyAt(P, 1_020)).toMatchObject({ readyAt: 4_020, source: "client-hint" });
    expect(s.betweenCalls().map((p) => p.programId)).toEqual([P]);
    expect(predictions.slice(-2)).toEqual(["client-hint", "client-hint"]);
    expect(events).toEqual(["tool_started:applied", "tool_started:applied"]);
  });

  it("drops a tool_finished that lost the race with the program's next call", () => {
    const { s, events } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 1_000, completed());
    s.callArrived(P, 2_000);
    expect(s.toolEvents(P, [{ type: "tool_finished", thread: "main", tool_call_id: "c1" }], 2_010, 2_010)).toBe(0);
    expect(events).toEqual(["tool_finished:stale"]);
    expect(s.readiness.predictReadyAt(P, 2_010).status).toBe("in-call");
  });

  it("a finished tool makes the program ready at once", () => {
    const { s } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 1_000, completed());
    s.toolEvents(P, [started({ tool_call_id: "c1", expected_duration_ms: 60_000 })], 1_000, 1_000);
    expect(s.readiness.isReadySoon(P, 1_500)).toBe(false);
    s.toolEvents(P, [{ type: "tool_finished", thread: "main", tool_call_id: "c1" }], 1_600, 1_600);
    expect(s.readiness.predictReadyAt(P, 1_600)).toMatchObject({ source: "tool-finished", readyAt: 1_600 });
  });

  it("is bounded: prune drops idle programs and expired phases", () => {
    const { s } = signals();
    s.callArrived(P, 0);
    s.callEnded(P, 1_000, completed());
    s.toolEvents("prog_neverseen1", [started({ expected_duration_ms: 10 })], 1_000, 1_000);
    expect(s.programCount).toBe(1);
    s.prune(1_000);
    expect(s.programCount).toBe(1);
    s.prune(1_000 + DEFAULT_TAO_SETTINGS.readiness.maxPredictionAgeMs + 1 + DEFAULT_TAO_SETTINGS.cacheCredit.halfLifeMs * 20);
    expect(s.programCount).toBe(0);
    expect(s.betweenCallsCount).toBe(0);
    expect(s.readiness.programCount).toBe(0);
    expect(s.credits.programCount).toBe(0);
  });
});
