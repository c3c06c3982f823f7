import { describe, expect, it } from "vitest";
import { type EvolveCallRecord, type EvolveResult, simulateEvolvingPool, summarise } from "../../src/sim/evolve/pd-simulation.js";
import { CLIENT_MAX_TOKENS, type EvolveProgram, shiftingWorkload } from "../../src/sim/evolve/workload.js";
import { DECODE_HOLD_MAX_MS } from "../../src/core/roles/decode-placement.js";

/*
 * The evolve simulator runs the pool core's rules (DESIGN: the pool and the simulator run
 * the very same code): role switches as the core's EngineRoleBook completes them, and
 * decodes placed as PoolCore.admitDecode places them (ranked by KV room on the pool's
 * account, which counts decodes placed and still waiting for blocks; held at an engine's
 * decode cap or its own backlog).
 */

const profile = "llama-3.1-8b-h100" as const;

/** One request a call put on an engine: when it was given, when it left, under which leg. */
interface EngineRequest {
  engineId: string;
  givenMs: number;
  endedMs: number;
}

/** The requests the calls put on engines: a prefill (or a whole call on a mixed engine) from the pool's dispatch, a decode from its placement. */
function requestsOf(calls: readonly EvolveCallRecord[]): EngineRequest[] {
  return calls.flatMap((c): EngineRequest[] => {
    if (c.decodeEngineId === undefined) return [{ engineId: c.prefillEngineId, givenMs: c.dispatchMs, endedMs: c.finishMs }];
    return [
      { engineId: c.prefillEngineId, givenMs: c.dispatchMs, endedMs: c.firstTokenMs },
      { engineId: c.decodeEngineId, givenMs: c.firstTokenMs + c.decodeHeldMs, endedMs: c.finishMs },
    ];
  });
}

/** A hair-trigger threshold controller on a shifting mix: it switches as soon as the queue or KV moves. */
function switchingRun(roleSwitch: "drain" | "overlap"): EvolveResult {
  const programs = shiftingWorkload(
    [
      { kind: "math", durationMs: 30_000, programsPerSec: 2 },
      { kind: "computer-use", durationMs: 30_000, programsPerSec: 3 },
    ],
    3,
  );
  return simulateEvolvingPool({
    engines: 4,
    profile,
    programs,
    roleSwitch,
    policy: { kind: "threshold", prefillEngines: 1, settings: { prefillQueueHigh: 0, prefillQueueLow: 0.5, decodeKvHigh: 0.02, decodeKvLow: 0.5, cooldownMs: 10_000 } },
  });
}

describe("role switches in the evolve simulator follow the core's EngineRoleBook", () => {
  it("drain: the engine is given nothing from the switch on, and takes its new role when its last request left", () => {
    const run = switchingRun("drain");
    expect(run.programsFinished).toBeGreaterThan(0);
    const requests = requestsOf(run.calls);
    expect(run.switches.length).toBeGreaterThan(2);
    let waited = 0;
    for (const s of run.switches) {
      const on = requests.filter((r) => r.engineId === s.engineId);
      const lastEnd = Math.max(s.atMs, ...on.filter((r) => r.givenMs < s.atMs).map((r) => r.endedMs));
      expect(s.mode).toBe("drain");
      expect(s.doneMs).toBe(lastEnd);
      if (lastEnd > s.atMs) waited++;
      // Nothing new while it drains (of either role).
      expect(on.filter((r) => r.givenMs > s.atMs && r.givenMs < lastEnd)).toEqual([]);
    }
    expect(waited).toBeGreaterThan(0);
  });

  it("overlap: the engine takes its new role's work at once; the switch is complete when its old role's last request left", () => {
    const run = switchingRun("overlap");
    const requests = requestsOf(run.calls);
    expect(run.switches.length).toBeGreaterThan(2);
    let overlapped = 0;
    for (const s of run.switches) {
      const on = requests.filter((r) => r.engineId === s.engineId);
      // Every request on the engine before the switch was given under its old role (the book lets one switch run at a time).
      const lastOld = Math.max(s.atMs, ...on.filter((r) => r.givenMs < s.atMs).map((r) => r.endedMs));
      expect(s.mode).toBe("overlap");
      expect(s.doneMs).toBe(lastOld);
      // New-role work given while the old role's requests were finishing.
      if (on.some((r) => r.givenMs > s.atMs && r.givenMs < lastOld)) overlapped++;
    }
    expect(overlapped).toBeGreaterThan(0);
  });

  it("never switches the last engine serving a side (the book's rule)", () => {
    const programs = shiftingWorkload([{ kind: "computer-use", durationMs: 20_000, programsPerSec: 3 }], 5);
    // Two engines, a controller that wants a second prefill engine at once: the only decode engine must stay.
    const run = simulateEvolvingPool({
      engines: 2,
      profile,
      programs,
      policy: { kind: "threshold", prefillEngines: 1, settings: { prefillQueueHigh: 0, prefillQueueLow: 0.5, decodeKvHigh: 0.02, decodeKvLow: 0.5, minDecodeEngines: 0, minPrefillEngines: 0, cooldownMs: 1_000 } },
    });
    expect(run.switches).toEqual([]);
    expect(run.programsFinished).toBe(programs.length);
  });
});

describe("decode placement in the evolve simulator is the pool core's", () => {
  const coding = (id: string, at: number, promptTokens: number, outputTokens: number): EvolveProgram => ({
    id,
    kind: "coding",
    phase: 0,
    arrivalMs: at,
    shape: { firstPromptTokens: promptTokens, stepTokens: 0, outputTokens, calls: 1, toolMs: 0 },
  });

  it("ranks decode engines by the account's room, which counts decodes placed and still waiting for blocks: two long decodes neither engine has blocks for go to different engines", () => {
    // Two prefill engines, two decode engines (421k tokens of KV each). Six long decodes fill the decode engines (about 305k and
    // 310k tokens), then two 125k-token calls are handed off within a second: neither decode engine has blocks for one.
    const preload = (i: number) => coding(`long-${i}`, i, i % 2 === 0 ? 100_000 : 105_000, 3_000);
    const programs = [...Array.from({ length: 6 }, (_, i) => preload(i)), coding("b", 10, 125_000, 50), coding("c", 11, 125_000, 50)];
    const run = simulateEvolvingPool({ engines: 4, profile, programs, policy: { kind: "fixed", prefillEngines: 2 } });
    expect(run.programsFinished).toBe(programs.length);
    const callOf = (id: string) => run.calls.find((c) => c.programId === id) as EvolveCallRecord;
    const [b, c] = [callOf("b"), callOf("c")];
    // Not held for KV projected at peak (a decode engine takes blocks as they free): both placed at their hand-off, where they waited for blocks.
    expect(summarise(run).decodeHolds).toBe(0);
    const [first, second] = b.firstTokenMs <= c.firstTokenMs ? [b, c] : [c, b];
    expect(first.decodeRoomWaitMs).toBeGreaterThan(0);
    // The second was placed while the first still waited for blocks on its engine: the account counted it there (kvUsage did not).
    expect(second.firstTokenMs).toBeLessThan(first.firstTokenMs + first.decodeRoomWaitMs);
    expect(second.decodeEngineId).not.toBe(first.decodeEngineId);
    expect(run.kvBlocksHeldAtEnd).toBe(0);
    expect(run.calls.map((call) => call.decodeRecomputedTokens)).toEqual(run.calls.map(() => 0));
  });

  it("holds a decode at the engine's decode cap, and sends it when a decode there ends", () => {
    const programs = Array.from({ length: 6 }, (_, i) => coding(`c${i}`, i * 10, 2_000, 2_000));
    const run = simulateEvolvingPool({ engines: 2, profile, programs, policy: { kind: "fixed", prefillEngines: 1 }, maxDecodes: 2 });
    expect(run.programsFinished).toBe(programs.length);
    expect(summarise(run).decodeHoldsByReason).toEqual({ count: 4 });
    // Never more than two decodes on the engine at once.
    const decodes = requestsOf(run.calls).filter((r) => r.engineId === "engine-1");
    for (const d of decodes) expect(decodes.filter((o) => o.givenMs <= d.givenMs && o.endedMs > d.givenMs).length).toBeLessThanOrEqual(2);
    expect(Math.max(...run.calls.map((c) => c.decodeHeldMs))).toBeLessThan(DECODE_HOLD_MAX_MS);
  });

  it("holds a decode while the decode engine reports a backlog of its own (its waiting queue past the pool's maxEngineWaiting), not before", () => {
    // One decode engine of 421k tokens; each decode needs 43k at its peak, so about nine run and the rest wait inside it for blocks.
    const programs = Array.from({ length: 24 }, (_, i) => coding(`c${i}`, i * 50, 40_000, 3_000));
    const run = simulateEvolvingPool({ engines: 5, profile, programs, policy: { kind: "fixed", prefillEngines: 4 } });
    expect(run.programsFinished).toBe(programs.length);
    const held = summarise(run).decodeHoldsByReason;
    expect(held["engine-backlog"]).toBeGreaterThan(0);
    expect(Object.keys(held)).toEqual(["engine-backlog"]);
    // Some decodes waited for blocks inside the engine (sent before a scrape showed its queue): the pool does not hold at KV projected at peak.
    expect(run.calls.filter((c) => c.decodeRoomWaitMs > 0).length).toBeGreaterThan(0);
  });
});

describe("new calls in the evolve simulator go through the pool core's queue", () => {
  const program = (id: string, at: number, promptTokens: number, outputTokens: number, calls: number): EvolveProgram => ({
    id,
    kind: "coding",
    phase: 0,
    arrivalMs: at,
    shape: { firstPromptTokens: promptTokens, stepTokens: 500, outputTokens, calls, toolMs: 100 },
  });

  /**
   * One prefill engine with a count cap of 1. A veteran's first call runs, then a 100k-token
   * prompt holds the prefill engine for seconds; meanwhile the veteran's second call and a
   * newcomer's first call arrive, in that order, and wait in the pool's queue.
   */
  const run = (veteranOutputTokens: number) => {
    const programs = [program("veteran", 0, 1_000, veteranOutputTokens, 2), program("busy", 1, 100_000, 10, 1), program("newcomer", 4_000, 1_000, 400, 1)];
    const result = simulateEvolvingPool({ engines: 2, profile, programs, policy: { kind: "fixed", prefillEngines: 1 }, maxInFlight: 1 });
    expect(result.programsFinished).toBe(programs.length);
    const callOf = (id: string, n = 0) => result.calls.filter((c) => c.programId === id)[n] as EvolveCallRecord;
    return { result, veteran: [callOf("veteran"), callOf("veteran", 1)] as const, busy: callOf("busy"), newcomer: callOf("newcomer") };
  };

  it("holds new calls in the queue while every prefill engine is at its count cap, and counts the wait in TTFT", () => {
    const { result, veteran, busy, newcomer } = run(400);
    // Not sent at arrival: the long prompt waited for the veteran's prefill, the two later calls for the long prompt's.
    expect(busy.dispatchMs).toBe(veteran[0].firstTokenMs);
    for (const c of [veteran[1], newcomer]) {
      expect(c.arrivalMs).toBeLessThan(busy.firstTokenMs);
      expect(c.dispatchMs).toBeGreaterThanOrEqual(busy.firstTokenMs);
      expect(c.firstTokenMs - c.arrivalMs).toBeGreaterThan(c.dispatchMs - c.arrivalMs);
    }
    // Never more than one prefill on the prefill engine.
    const prefills = result.calls.map((c) => ({ from: c.dispatchMs, to: c.firstTokenMs }));
    for (const p of prefills) expect(prefills.filter((o) => o.from <= p.from && o.to > p.from).length).toBe(1);
  });

  it("dispatches the queue in PLAS order: the newcomer (no service yet) before the veteran's call that waited longer", () => {
    const { veteran, newcomer } = run(400);
    // The veteran's first call's 400 tokens put it past the queue's first level (1 s of service).
    expect(veteran[1].arrivalMs).toBeLessThan(newcomer.arrivalMs);
    expect(newcomer.dispatchMs).toBeLessThan(veteran[1].dispatchMs);
    // With a short first answer (the same level as the newcomer), first come first served.
    const short = run(20);
    expect(short.veteran[1].arrivalMs).toBeLessThan(short.newcomer.arrivalMs);
    expect(short.veteran[1].dispatchMs).toBeLessThan(short.newcomer.dispatchMs);
  });
});

describe("what the evolve simulator's agents send", () => {
  it("refuses an agent whose answer is longer than the max_tokens it sends (the engine would stop at the cap, not at the answer)", () => {
    const [program] = shiftingWorkload([{ kind: "math", durationMs: 1_000, programsPerSec: 2 }], 3) as [EvolveProgram];
    const config = { engines: 2, profile, policy: { kind: "mixed" as const } };
    expect(simulateEvolvingPool({ ...config, programs: [program] }).programsFinished).toBe(1);
    const tooLong: EvolveProgram = { ...program, shape: { ...program.shape, outputTokens: CLIENT_MAX_TOKENS + 1 } };
    expect(() => simulateEvolvingPool({ ...config, programs: [tooLong] })).toThrow(/past the client's max_tokens/);
  });
});
