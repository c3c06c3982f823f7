import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { contextTag, type ContextRef, DEFAULT_RETENTION_SETTINGS, RetentionPlanner } from "../../../src/core/kv/retention-planner.js";
import { RatioWindow } from "../../../src/core/kv/ratio-window.js";
import { isKvRetentionTag, KvRetentionTag, MAX_KV_KEEP_MS } from "../../../src/protocol/kv-retention.js";
import { Rng } from "../../../src/sim/workload/prng.js";

const P = "prog_planner01";
const ref = (threadId = "main", generation = 0, programId = P): ContextRef => ({ programId, threadId, generation });
const tag = (threadId = "main", generation = 0, programId = P) => `${programId}:${threadId}:${generation}`;

/** A planner that has run one call of `ref` on `engine` to its end at t = 1000. */
function afterOneCall(engine = "e1", context = ref()): RetentionPlanner {
  const planner = new RetentionPlanner();
  expect(planner.callArrived(context, 0)).toEqual([]);
  expect(planner.callStarted(context, engine, 10)).toEqual([]);
  planner.callEnded(context, 1_000);
  return planner;
}

describe("retention planner", () => {
  it("tags a context program:thread:generation, and gives no tag to IDs a tag cannot hold", () => {
    expect(contextTag(ref("branch.1", 3))).toBe("prog_planner01:branch.1:3");
    expect(contextTag(ref("has space"))).toBeUndefined();
    expect(contextTag(ref("main", 0, `prog_${"x".repeat(200)}`))).toBeUndefined();
  });

  it("takes a tag exactly where the KvRetentionTag schema does", () => {
    const tagLike = fc.string({ unit: fc.constantFrom("a", "Z", "0", ".", "_", ":", "-", " ", "/", "é", "\n"), maxLength: 170 });
    fc.assert(
      fc.property(fc.oneof(tagLike, fc.string()), (text) => {
        expect(isKvRetentionTag(text)).toBe(KvRetentionTag.safeParse(text).success);
      }),
      { numRuns: 5_000 },
    );
    for (const text of ["", "a".repeat(160), "a".repeat(161), "p:t:0", "p t"]) expect(isKvRetentionTag(text)).toBe(KvRetentionTag.safeParse(text).success);
  });

  it("keeps a context through a predicted tool wait: until the return plus the margin, on the engine that holds it", () => {
    const planner = afterOneCall("e1");
    expect(planner.toolWait(P, 1_000 + 8_000, 1_000)).toEqual([
      { engineId: "e1", hint: { action: "keep", tag: tag(), keep_ms: 8_000 + DEFAULT_RETENTION_SETTINGS.keepMarginMs } },
    ]);
  });

  it("caps a keep at MAX_KV_KEEP_MS, and keeps nothing for a return already past the margin", () => {
    const planner = afterOneCall();
    expect(planner.toolWait(P, 1_000 + 3_600_000, 1_000)).toEqual([{ engineId: "e1", hint: { action: "keep", tag: tag(), keep_ms: MAX_KV_KEEP_MS } }]);
    expect(planner.toolWait(P, 1_000 - DEFAULT_RETENTION_SETTINGS.keepMarginMs - 1, 1_000)).toEqual([]);
  });

  it("says a keep is in force on the engine it was sent to, until it runs out, for the kept generation only", () => {
    const planner = afterOneCall("e1");
    expect(planner.keeps(ref(), "e1", 1_000)).toBe(false);
    planner.toolWait(P, 1_000 + 8_000, 1_000);
    const until = 1_000 + 8_000 + DEFAULT_RETENTION_SETTINGS.keepMarginMs;
    expect(planner.keeps(ref(), "e1", until - 1)).toBe(true);
    expect(planner.keeps(ref(), "e1", until)).toBe(false);
    expect(planner.keeps(ref(), "e2", 2_000)).toBe(false);
    expect(planner.keeps(ref("main", 1), "e1", 2_000)).toBe(false);
    expect(planner.keeps(ref("other"), "e1", 2_000)).toBe(false);
    // The context's next call withdraws the keep.
    planner.callStarted(ref(), "e1", 3_000);
    expect(planner.keeps(ref(), "e1", 3_001)).toBe(false);
  });

  it("keeps nothing of a program it never saw run, nor of a thread with a call running", () => {
    const planner = new RetentionPlanner();
    expect(planner.toolWait("prog_unknown01", 5_000, 0)).toEqual([]);
    planner.callArrived(ref(), 0);
    planner.callStarted(ref(), "e1", 0);
    expect(planner.toolWait(P, 5_000, 100)).toEqual([]);
  });

  it("a new prediction keeps again with its own duration (a tool event moved it)", () => {
    const planner = afterOneCall();
    planner.toolWait(P, 6_000, 1_000);
    expect(planner.toolWait(P, 31_000, 2_000)).toEqual([{ engineId: "e1", hint: { action: "keep", tag: tag(), keep_ms: 31_000 } }]);
  });

  it("withdraws a keep (normal) when the context's next call is dispatched, on every engine that held it", () => {
    const planner = afterOneCall("e1");
    planner.toolWait(P, 5_000, 1_000);
    planner.callArrived(ref(), 4_000);
    expect(planner.callStarted(ref(), "e2", 4_010)).toEqual([{ engineId: "e1", hint: { action: "normal", tag: tag() } }]);
    planner.callEnded(ref(), 5_000);
    // Both engines hold it now: the next keep goes to both.
    expect(planner.toolWait(P, 9_000, 5_000).map((h) => h.engineId).sort()).toEqual(["e1", "e2"]);
  });

  it("says nothing when a call comes after its keep already ran out", () => {
    const planner = afterOneCall();
    planner.toolWait(P, 2_000, 1_000);
    planner.callArrived(ref(), 60_000);
    expect(planner.callStarted(ref(), "e1", 60_000)).toEqual([]);
  });

  it("drops a thread's older generation where it is held once a newer one arrives, and ignores a late older call", () => {
    const planner = afterOneCall("e1");
    expect(planner.callArrived(ref("main", 1), 2_000)).toEqual([{ engineId: "e1", hint: { action: "drop", tag: tag("main", 0) } }]);
    expect(planner.callArrived(ref("main", 0), 2_100)).toEqual([]);
    expect(planner.callStarted(ref("main", 1), "e2", 2_200)).toEqual([]);
    planner.callEnded(ref("main", 1), 3_000);
    // Only the new generation is kept now, where it ran.
    expect(planner.toolWait(P, 5_000, 3_000)).toEqual([{ engineId: "e2", hint: { action: "keep", tag: tag("main", 1), keep_ms: 4_000 } }]);
  });

  it("hints a thread's new generation by its own tag after its older one was hinted, and never a thread whose IDs form none", () => {
    const planner = afterOneCall("e1");
    expect(planner.toolWait(P, 5_000, 1_000).map((h) => h.hint.tag)).toEqual([tag("main", 0)]);
    expect(planner.callArrived(ref("main", 1), 2_000)).toEqual([{ engineId: "e1", hint: { action: "drop", tag: tag("main", 0) } }]);
    planner.callStarted(ref("main", 1), "e1", 2_100);
    planner.callEnded(ref("main", 1), 3_000);
    expect(planner.toolWait(P, 9_000, 3_000).map((h) => h.hint.tag)).toEqual([tag("main", 1)]);
    expect(planner.callStarted(ref("main", 1), "e1", 4_000)).toEqual([{ engineId: "e1", hint: { action: "normal", tag: tag("main", 1) } }]);

    const untagged = afterOneCall("e1", ref("has space"));
    for (let i = 0; i < 2; i++) {
      expect(untagged.toolWait(P, 9_000 + i, 1_000 + i)).toEqual([]);
      expect(untagged.callArrived(ref("has space", i + 1), 1_000 + i)).toEqual([]);
    }
  });

  it("keeps only the branches the program's last turn used: a thread it left earlier is not kept", () => {
    const planner = afterOneCall("e1", ref("main"));
    // The next turn runs on another branch only.
    planner.callArrived(ref("branch"), 2_000);
    planner.callStarted(ref("branch"), "e2", 2_000);
    planner.callEnded(ref("branch"), 2_500);
    expect(planner.toolWait(P, 5_000, 2_500)).toEqual([{ engineId: "e2", hint: { action: "keep", tag: tag("branch"), keep_ms: 4_500 } }]);
  });

  it("keeps every branch of a parallel turn, including one that finished before the others started", () => {
    const planner = new RetentionPlanner();
    planner.callArrived(ref("a"), 0);
    planner.callStarted(ref("a"), "e1", 0);
    planner.callArrived(ref("b"), 10);
    planner.callStarted(ref("b"), "e2", 10);
    planner.callEnded(ref("a"), 100);
    planner.callArrived(ref("c"), 150);
    planner.callStarted(ref("c"), "e1", 150);
    planner.callEnded(ref("b"), 200);
    planner.callEnded(ref("c"), 300);
    expect(planner.toolWait(P, 2_000, 300).map((h) => h.hint.tag)).toEqual([tag("a"), tag("b"), tag("c")]);
  });

  it("an older generation's call that ends late does not hold the new generation's context back from a keep", () => {
    const planner = new RetentionPlanner();
    planner.callArrived(ref("main", 0), 0);
    planner.callStarted(ref("main", 0), "e1", 0);
    planner.callArrived(ref("main", 1), 10);
    planner.callStarted(ref("main", 1), "e2", 10);
    planner.callEnded(ref("main", 1), 100);
    planner.callEnded(ref("main", 0), 200);
    expect(planner.toolWait(P, 2_000, 200)).toEqual([{ engineId: "e2", hint: { action: "keep", tag: tag("main", 1), keep_ms: 3_800 } }]);
  });

  it("a newer generation of one thread leaves the other threads' contexts alone", () => {
    const planner = afterOneCall("e1", ref("main"));
    planner.callArrived(ref("side"), 1_100);
    planner.callStarted(ref("side"), "e2", 1_100);
    planner.callEnded(ref("side"), 1_500);
    expect(planner.callArrived(ref("main", 1), 2_000)).toEqual([{ engineId: "e1", hint: { action: "drop", tag: tag("main", 0) } }]);
    expect(planner.toolWait(P, 4_000, 2_000)).toEqual([{ engineId: "e2", hint: { action: "keep", tag: tag("side"), keep_ms: 4_000 } }]);
  });

  it("drops every context of a program that ended, and forgets it (a later prediction keeps nothing)", () => {
    const planner = afterOneCall("e1", ref("main"));
    planner.callArrived(ref("fork"), 1_100);
    planner.callStarted(ref("fork"), "e2", 1_100);
    planner.callEnded(ref("fork"), 1_500);
    expect(planner.programEnded(P)).toEqual([
      { engineId: "e1", hint: { action: "drop", tag: tag("main") } },
      { engineId: "e2", hint: { action: "drop", tag: tag("fork") } },
    ]);
    expect(planner.programCount).toBe(0);
    expect(planner.toolWait(P, 9_000, 2_000)).toEqual([]);
    expect(planner.programEnded(P)).toEqual([]);
  });

  it("a split call's decode engine holds the context too: drops reach it beside the prefill engine, a tool wait's keep only with keepHandedOverCopies", () => {
    for (const keepHandedOverCopies of [false, true]) {
      const planner = new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, keepHandedOverCopies });
      planner.callArrived(ref(), 0);
      planner.callStarted(ref(), "prefill-1", 0);
      planner.heldOn(ref(), "decode-1");
      planner.callEnded(ref(), 1_000);
      expect(planner.toolWait(P, 3_000, 1_000).map((h) => h.engineId)).toEqual(keepHandedOverCopies ? ["prefill-1", "decode-1"] : ["prefill-1"]);
      // The next call withdraws the keep wherever it was, and the program's end drops both copies.
      expect(planner.callStarted(ref(), "prefill-1", 2_000).map((h) => h.engineId)).toEqual(["prefill-1", "decode-1"]);
      expect(planner.programEnded(P).map((h) => `${h.engineId}:${h.hint.action}`)).toEqual(["prefill-1:drop", "decode-1:drop"]);
    }
    const planner = new RetentionPlanner();
    planner.callArrived(ref(), 0);
    planner.callStarted(ref(), "prefill-1", 0);
    planner.heldOn(ref(), "decode-1");
    planner.callEnded(ref(), 1_000);
    // An older generation's late decode adds nothing to the current one.
    planner.callArrived(ref("main", 1), 2_000);
    planner.heldOn(ref("main", 0), "decode-2");
    expect(planner.programEnded(P)).toEqual([]);
  });

  describe("thread_ended (a branch abandoned or merged)", () => {
    /** main and its fork "branch" both ran on e1; the branch also on e2 (a split call's decode engine). */
    function twoBranches(): RetentionPlanner {
      const planner = new RetentionPlanner();
      const branch = ref("branch", 0);
      // One turn: both branches' calls run at once.
      planner.callArrived(ref(), 0);
      planner.callStarted(ref(), "e1", 0);
      planner.callArrived(branch, 10);
      planner.callStarted(branch, "e1", 10);
      planner.heldOn(branch, "e2");
      planner.callEnded(ref(), 2_000);
      planner.callEnded(branch, 3_000);
      return planner;
    }

    it("drops the ended thread's context on every engine that holds it, and no other thread's", () => {
      const planner = twoBranches();
      const hints = planner.threadEnded(P, "branch", 0);
      expect(hints.sort((a, b) => a.engineId.localeCompare(b.engineId))).toEqual([
        { engineId: "e1", hint: { action: "drop", tag: tag("branch") } },
        { engineId: "e2", hint: { action: "drop", tag: tag("branch") } },
      ]);
      expect(planner.inspect(P, 3_000)).toEqual([
        { threadId: "main", generation: 0, engines: ["e1"], keptUntil: undefined },
        { threadId: "branch", generation: 0, engines: [], keptUntil: undefined },
      ]);
      // Ended once: a repeat (the edge's retry) drops nothing more.
      expect(planner.threadEnded(P, "branch", 0)).toEqual([]);
    });

    it("an ended thread's context is not kept through the program's tool wait; its sibling's is", () => {
      const planner = twoBranches();
      planner.threadEnded(P, "branch", 0);
      expect(planner.toolWait(P, 8_000, 3_000).map((h) => [h.engineId, h.hint.tag])).toEqual([["e1", tag("main")]]);
    });

    it("leaves alone a thread reopened at a newer generation before the hint came, and unknown threads", () => {
      const planner = twoBranches();
      planner.callArrived(ref("branch", 1), 4_000);
      expect(planner.threadEnded(P, "branch", 0)).toEqual([]);
      expect(planner.threadEnded(P, "nobody", 0)).toEqual([]);
      expect(planner.threadEnded("prog_unknown01", "main", 0)).toEqual([]);
    });

    it("a call of the ended context after all withdraws the drop where it went (normal), and the thread is tracked again", () => {
      const planner = twoBranches();
      planner.threadEnded(P, "branch", 0);
      planner.callArrived(ref("branch", 0), 5_000);
      const hints = planner.callStarted(ref("branch", 0), "e3", 5_000);
      expect(hints.map((h) => [h.engineId, h.hint]).sort()).toEqual([
        ["e1", { action: "normal", tag: tag("branch") }],
        ["e2", { action: "normal", tag: tag("branch") }],
        ["e3", { action: "normal", tag: tag("branch") }],
      ]);
      expect(planner.inspect(P, 5_000)?.find((c) => c.threadId === "branch")?.engines).toEqual(["e3"]);
    });

    it("a thread ended with a call still running keeps the program's live count: it is not forgotten while the call runs", () => {
      const planner = new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, forgetAfterMs: 10_000 });
      planner.callArrived(ref("branch"), 0);
      planner.callStarted(ref("branch"), "e1", 0);
      expect(planner.threadEnded(P, "branch", 0)).toEqual([{ engineId: "e1", hint: { action: "drop", tag: tag("branch") } }]);
      planner.prune(20_000);
      expect(planner.programCount).toBe(1);
      planner.callEnded(ref("branch"), 20_000);
      planner.prune(40_000);
      expect(planner.programCount).toBe(0);
    });
  });

  it("a split call's prefill copy is kept on its prefill engine through the expected transfer and decode, × handoffKeepFactor", () => {
    const planner = new RetentionPlanner();
    planner.callArrived(ref(), 0);
    planner.callStarted(ref(), "prefill-1", 0);
    planner.callEnded(ref(), 400);
    expect(planner.prefillHandedOff(ref(), "prefill-1", 10_000, 400)).toEqual([
      { engineId: "prefill-1", hint: { action: "keep", tag: tag(), keep_ms: 10_000 * DEFAULT_RETENTION_SETTINGS.handoffKeepFactor } },
    ]);
    planner.heldOn(ref(), "decode-1");
    expect(planner.inspect(P, 500)?.[0]?.keptUntil).toBe(400 + 15_000);
    // The call ends and the tool wait keeps the prefill engine's copy (not the decode engine's); the next call withdraws the keep everywhere.
    expect(planner.toolWait(P, 12_000, 10_400).map((h) => h.engineId)).toEqual(["prefill-1"]);
    planner.callArrived(ref(), 12_000);
    expect(planner.callStarted(ref(), "prefill-1", 12_000).map((h) => `${h.engineId}:${h.hint.action}`)).toEqual(["prefill-1:normal", "decode-1:normal"]);
  });

  it("a handoff keeps nothing on an engine that does not hold the context, for an older generation, or for no expected time; it is capped", () => {
    const planner = afterOneCall("prefill-1");
    expect(planner.prefillHandedOff(ref(), "prefill-2", 5_000, 1_000)).toEqual([]);
    expect(planner.prefillHandedOff(ref(), "prefill-1", 0, 1_000)).toEqual([]);
    expect(planner.prefillHandedOff(ref(), "prefill-1", Number.NaN, 1_000)).toEqual([]);
    expect(planner.prefillHandedOff(ref(), "prefill-1", 1e9, 1_000)).toEqual([{ engineId: "prefill-1", hint: { action: "keep", tag: tag(), keep_ms: MAX_KV_KEEP_MS } }]);
    planner.callArrived(ref("main", 1), 2_000);
    expect(planner.prefillHandedOff(ref("main", 0), "prefill-1", 5_000, 2_000)).toEqual([]);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, handoffKeepFactor: -1 })).toThrow(/handoffKeepFactor/);
  });

  it("an engine that lost its cache is sent nothing more about what it held", () => {
    const planner = afterOneCall("e1");
    planner.engineLost("e1");
    expect(planner.toolWait(P, 5_000, 1_000)).toEqual([]);
    expect(planner.programEnded(P)).toEqual([]);
  });

  it("forgets an idle program after forgetAfterMs, but not one with a keep running or a call live", () => {
    const planner = new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, forgetAfterMs: 10_000 });
    planner.callArrived(ref("main", 0, "prog_idle00001"), 0);
    planner.callStarted(ref("main", 0, "prog_idle00001"), "e1", 0);
    planner.callEnded(ref("main", 0, "prog_idle00001"), 0);
    planner.callArrived(ref("main", 0, "prog_kept00001"), 0);
    planner.callStarted(ref("main", 0, "prog_kept00001"), "e1", 0);
    planner.callEnded(ref("main", 0, "prog_kept00001"), 0);
    planner.toolWait("prog_kept00001", 60_000, 0);
    planner.callArrived(ref("main", 0, "prog_live00001"), 0);
    planner.callStarted(ref("main", 0, "prog_live00001"), "e1", 0);
    planner.prune(20_000);
    expect(planner.programCount).toBe(2);
    planner.prune(70_000);
    expect(planner.programCount).toBe(1);
  });

  it("refuses settings that would send out-of-contract keeps", () => {
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, maxKeepMs: MAX_KV_KEEP_MS + 1 })).toThrow(/maxKeepMs/);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, keepMarginMs: -1 })).toThrow(/keepMarginMs/);
  });
  it("refuses learning settings that could not bound a keep", () => {
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, keepRatioQuantile: 0 })).toThrow(/keepRatioQuantile/);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, maxKeepFactor: 0.5 })).toThrow(/maxKeepFactor/);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, maxKeepFactor: Number.POSITIVE_INFINITY })).toThrow(/maxKeepFactor/);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, minRatioSamples: 0 })).toThrow(/minRatioSamples/);
    expect(() => new RetentionPlanner({ ...DEFAULT_RETENTION_SETTINGS, ratioWindow: 4, minRatioSamples: 5 })).toThrow(/minRatioSamples/);
  });
});

describe("retention planner: the keep margin, learned from observed waits", () => {
  const S = DEFAULT_RETENTION_SETTINGS;

  /**
   * One program, `waits` turns: a call, then a tool wait predicted as `predictedMs` whose
   * real length is actual(i) (the next call arrives then). Returns the planner and the clock.
   */
  function observe(actual: (predictedMs: number, i: number) => number, waits: number, planner = new RetentionPlanner(), predictedMs = 10_000) {
    let now = 0;
    for (let i = 0; i < waits; i++) {
      planner.callArrived(ref(), now);
      planner.callStarted(ref(), "e1", now);
      now += 500;
      planner.callEnded(ref(), now);
      planner.toolWait(P, now + predictedMs, now);
      now += actual(predictedMs, i);
    }
    // The last wait's real length is seen when its call arrives.
    planner.callArrived(ref(), now);
    return { planner, now };
  }

  /** The keep a fresh tool wait predicted at `predictedMs` gets now. */
  function keepFor(planner: RetentionPlanner, now: number, predictedMs: number): number | undefined {
    planner.callStarted(ref(), "e1", now);
    planner.callEnded(ref(), now + 1);
    const [hint] = planner.toolWait(P, now + 1 + predictedMs, now + 1);
    return hint?.hint.action === "keep" ? hint.hint.keep_ms : undefined;
  }

  it("with no wait seen yet, the fixed margin: finite keeps, no NaN, for any prediction", () => {
    const planner = new RetentionPlanner();
    expect(planner.observedWaits).toBe(0);
    expect(planner.keepFactor).toBeUndefined();
    expect(planner.keepMsFor(8_000)).toBe(8_000 + S.keepMarginMs);
    for (const predicted of [0, -500, 1e-9, 3_600_000]) expect(Number.isFinite(planner.keepMsFor(predicted))).toBe(true);
    // Still fixed below minRatioSamples.
    const few = observe(() => 30_000, S.minRatioSamples - 1).planner;
    expect(few.observedWaits).toBe(S.minRatioSamples - 1);
    expect(few.keepFactor).toBeUndefined();
  });

  it("an exact predictor gets keeps of the prediction plus the small learned margin, shorter than the fixed one", () => {
    const { planner, now } = observe((predicted) => predicted, 40);
    expect(planner.observedWaits).toBe(40);
    expect(planner.keepFactor).toBe(1);
    expect(keepFor(planner, now, 8_000)).toBe(8_000 + S.learnedMarginMs);
  });

  it("a predictor that runs late by up to 50 % (uniform): keeps cover ~90 % of such waits, not all", () => {
    const rng = new Rng(11);
    const { planner, now } = observe((predicted) => predicted * (1 + 0.5 * rng.nextOpen()), 200);
    const factor = planner.keepFactor ?? Number.NaN;
    // The uniform's 0.9-quantile is 1.45; 200 samples put the estimate within a few hundredths.
    expect(factor).toBeGreaterThan(1.4);
    expect(factor).toBeLessThan(1.5);
    expect(keepFor(planner, now, 10_000)).toBe(Math.ceil(10_000 * factor + S.learnedMarginMs));
    // Fresh waits from the same predictor: the factor alone (without the learned margin) outlasts about nine in ten.
    const fresh = new Rng(12);
    let covered = 0;
    for (let i = 0; i < 1_000; i++) if (1 + 0.5 * fresh.nextOpen() <= factor) covered++;
    expect(covered).toBeGreaterThan(860);
    expect(covered).toBeLessThan(940);
  });

  it("a predictor that is early keeps no less than the prediction; one far too early is bounded by maxKeepFactor and MAX_KV_KEEP_MS", () => {
    const early = observe((predicted) => predicted * 0.5, 40);
    expect(early.planner.keepFactor).toBe(1);
    const late = observe((predicted) => predicted * 20, 40);
    expect(late.planner.keepFactor).toBe(S.maxKeepFactor);
    expect(keepFor(late.planner, late.now, 10_000)).toBe(10_000 * S.maxKeepFactor + S.learnedMarginMs);
    expect(keepFor(late.planner, late.now + 1e6, 200_000)).toBe(MAX_KV_KEEP_MS);
  });

  it("follows the predictor as it changes: the window forgets the oldest waits", () => {
    const settings = { ...S, ratioWindow: 32, minRatioSamples: 8 };
    const late = observe((predicted) => predicted * 2, 32, new RetentionPlanner(settings));
    expect(late.planner.keepFactor).toBe(2);
    const { planner } = observe((predicted) => predicted, 32, late.planner);
    expect(planner.keepFactor).toBe(1);
  });

  it("learns nothing from a prediction too short to measure, a program that ended, or when learning is off", () => {
    const tiny = observe(() => 5_000, 40, new RetentionPlanner(), 50);
    expect(tiny.planner.observedWaits).toBe(0);
    const ended = new RetentionPlanner();
    for (let i = 0; i < 40; i++) {
      const program = `prog_ended${String(i).padStart(4, "0")}`;
      ended.callArrived(ref("main", 0, program), 0);
      ended.callStarted(ref("main", 0, program), "e1", 0);
      ended.callEnded(ref("main", 0, program), 10);
      ended.toolWait(program, 5_000, 10);
      ended.programEnded(program);
    }
    expect(ended.observedWaits).toBe(0);
    const fixed = observe((predicted) => predicted * 2, 40, new RetentionPlanner({ ...S, learnKeepMargin: false }));
    expect(fixed.planner.observedWaits).toBe(40);
    expect(fixed.planner.keepFactor).toBeUndefined();
    expect(keepFor(fixed.planner, fixed.now, 8_000)).toBe(8_000 + S.keepMarginMs);
  });

  it("a tool event that moves the prediction: the wait is measured against the latest one", () => {
    const planner = new RetentionPlanner({ ...S, minRatioSamples: 1 });
    planner.callArrived(ref(), 0);
    planner.callStarted(ref(), "e1", 0);
    planner.callEnded(ref(), 0);
    planner.toolWait(P, 1_000, 0);
    // At 2 s a tool event says 4 s more; the call comes at 6 s: exactly as last predicted.
    planner.toolWait(P, 6_000, 2_000);
    planner.callArrived(ref(), 6_000);
    expect(planner.keepFactor).toBe(1);
  });
});

describe("ratio window", () => {
  it("nearest-rank quantiles over the most recent samples; empty is undefined; non-finite samples are ignored", () => {
    const window = new RatioWindow(4);
    expect(window.quantile(0.9)).toBeUndefined();
    for (const r of [4, 1, 3, 2, Number.NaN, Number.POSITIVE_INFINITY]) window.add(r);
    expect(window.size).toBe(4);
    expect([0, 0.25, 0.5, 0.9, 1].map((q) => window.quantile(q))).toEqual([1, 1, 2, 4, 4]);
    window.add(0.5);
    // 4 was the oldest: replaced.
    expect(window.quantile(1)).toBe(3);
    expect(() => new RatioWindow(0)).toThrow(/capacity/);
  });
});
