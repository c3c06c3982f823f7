import { describe, expect, it } from "vitest";
import { contextTag, type ContextRef, DEFAULT_RETENTION_SETTINGS, RetentionPlanner } from "../../../src/core/kv/retention-planner.js";
import { MAX_KV_KEEP_MS } from "../../../src/protocol/kv-retention.js";

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

  it("a split call's decode engine holds the context too: keeps and drops reach it beside the prefill engine", () => {
    const planner = new RetentionPlanner();
    planner.callArrived(ref(), 0);
    planner.callStarted(ref(), "prefill-1", 0);
    planner.heldOn(ref(), "decode-1");
    planner.callEnded(ref(), 1_000);
    expect(planner.toolWait(P, 3_000, 1_000).map((h) => h.engineId)).toEqual(["prefill-1", "decode-1"]);
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
});
