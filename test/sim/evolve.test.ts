import { describe, expect, it } from "vitest";
import { simulateEvolvingPool, summarise } from "../../src/sim/evolve/pd-simulation.js";
import { AGENT_SHAPES, type EvolveProgram, shiftingWorkload } from "../../src/sim/evolve/workload.js";
import { KV_LINKS, kvTransferMs } from "../../src/sim/kv-links.js";
import { ENGINE_PROFILES } from "../../src/sim/profiles.js";

/*
 * Issue 13: the evolving-pool simulator. A disaggregated call is prefilled on a prefill
 * engine, and a decode engine pulls its KV (the link's cost) once it has blocks for it,
 * so it computes only the prompt's last token; role switches, draining or overlapping,
 * lose no call.
 */

const profile = "llama-3.1-8b-h100" as const;
const blockSize = ENGINE_PROFILES[profile].blockSize;

describe("a disaggregated pool in the simulator", () => {
  it("prefills on one engine, moves the KV, and decodes on another without computing the prompt again", () => {
    const program: EvolveProgram = { id: "coding-0", kind: "coding", phase: 0, arrivalMs: 0, shape: { ...AGENT_SHAPES.coding, calls: 2 } };
    const split = simulateEvolvingPool({ engines: 2, profile, programs: [program], policy: { kind: "fixed", prefillEngines: 1 } });
    expect(split.calls).toHaveLength(2);
    const [first, second] = split.calls;
    expect(first!.transferMs).toBeCloseTo(kvTransferMs(KV_LINKS[profile], first!.promptTokens, "engine"), 9);
    expect(first!.transferMs).toBeGreaterThan(0);
    // The prefill engine computed the whole first prompt; the decode engine none of it again (only the last token, for its logits).
    expect(first!.computedPromptTokens).toBeGreaterThanOrEqual(first!.promptTokens);
    expect(first!.computedPromptTokens).toBeLessThan(first!.promptTokens + blockSize);
    expect(split.calls.map((c) => c.decodeRecomputedTokens)).toEqual([0, 0]);
    expect(first!.decodeRoomWaitMs).toBe(0);
    expect(first!.decodeKvWaitMs).toBeCloseTo(first!.transferMs, 9);
    // The second call's prefix was cached on the prefill engine: only its new tokens (and partial blocks) computed.
    expect(second!.computedPromptTokens).toBeLessThan(second!.promptTokens - first!.promptTokens + 3 * blockSize);
    expect(first!.firstTokenMs).toBeLessThan(first!.finishMs);

    // The same program on one mixed engine: no transfer, the same prompts and outputs.
    const mixed = simulateEvolvingPool({ engines: 1, profile, programs: [program], policy: { kind: "mixed" } });
    expect(mixed.calls.map((c) => [c.promptTokens, c.outputTokens, c.transferMs])).toEqual(split.calls.map((c) => [c.promptTokens, c.outputTokens, 0]));
  });

  it("under decode KV pressure, a decode waits for room and pulls the KV instead of recomputing it; the prefill copy is let go", () => {
    // 40 coding agents at once (24k-token contexts, 600-token answers) on 3 prefill engines and one decode engine (421k tokens of KV).
    const programs: EvolveProgram[] = Array.from({ length: 40 }, (_, i) => ({ id: `coding-${i}`, kind: "coding", phase: 0, arrivalMs: i * 50, shape: { ...AGENT_SHAPES.coding, calls: 1, outputTokens: 600 } }));
    const run = simulateEvolvingPool({ engines: 4, profile, programs, policy: { kind: "fixed", prefillEngines: 3 } });
    // Every call finished, and the prefill engines' pinned copies were let go as the pulls ended.
    expect(run.calls).toHaveLength(40);
    expect(run.kvBlocksHeldAtEnd).toBe(0);
    const summary = summarise(run);
    const promptTokens = run.calls.reduce((sum, c) => sum + c.promptTokens, 0);
    // Imported as evictable cached blocks, 0.56 M of these 0.96 M tokens were computed again on the decode engine.
    expect(summary.decodeRecomputedTokens).toBeLessThan(promptTokens / 100);
    expect(run.calls.filter((c) => c.decodeRoomWaitMs > 0).length).toBeGreaterThan(10);
  });

  it.each(["drain", "overlap"] as const)("loses no call while engines switch roles (%s)", (roleSwitch) => {
    const programs = shiftingWorkload(
      [
        { kind: "math", durationMs: 30_000, programsPerSec: 2 },
        { kind: "computer-use", durationMs: 30_000, programsPerSec: 3 },
      ],
      3,
    );
    // A hair-trigger threshold controller: it switches as soon as the queue or KV moves.
    const run = simulateEvolvingPool({
      engines: 4,
      profile,
      programs,
      roleSwitch,
      policy: { kind: "threshold", prefillEngines: 1, settings: { prefillQueueHigh: 0, prefillQueueLow: 0.5, decodeKvHigh: 0.02, decodeKvLow: 0.5, cooldownMs: 10_000 } },
    });
    expect(run.switches.length).toBeGreaterThan(2);
    expect(run.switches.every((s) => s.mode === roleSwitch && s.doneMs !== undefined && s.doneMs >= s.atMs)).toBe(true);
    // Some switch had calls of its old role to finish (it did not complete the moment it started).
    expect(run.switches.some((s) => s.doneMs! > s.atMs)).toBe(true);
    expect(run.programsFinished).toBe(programs.length);
    expect(run.calls).toHaveLength(programs.reduce((sum, p) => sum + p.shape.calls, 0));
  });
});

describe("KV beyond one GPU in the simulator", () => {
  // 28 long-tool, compacting coding agents at once on one mixed engine: their contexts (~700k tokens) outgrow its 421k of KV.
  const programs: EvolveProgram[] = Array.from({ length: 28 }, (_, i) => ({
    id: `coding-long-${i}`,
    kind: "coding-long",
    phase: 0,
    arrivalMs: i * 100,
    shape: { ...AGENT_SHAPES["coding-long"], calls: 6 },
  }));
  const run = (hostTier: boolean, retention: boolean) => simulateEvolvingPool({ engines: 1, profile, programs, policy: { kind: "mixed" }, hostTier, retention });

  it("recomputes evicted contexts on the GPU alone; the host tier reloads them instead", () => {
    const alone = run(false, false);
    const withHost = run(true, false);
    expect(alone.kv.recomputedTokens).toBeGreaterThan(100_000);
    expect(alone.kv.hostHitTokens).toBe(0);
    expect(withHost.kv.hostHitTokens).toBeGreaterThan(100_000);
    expect(withHost.kv.recomputedTokens).toBeLessThan(alone.kv.recomputedTokens / 10);
    expect(withHost.kv.pcieBytes).toBeGreaterThan(0);
    expect(withHost.calls).toHaveLength(alone.calls.length);
  });

  it("with retention, the planner's keeps (tool waits) and drops (compaction, program end) reach the engine", () => {
    const result = run(false, true);
    expect(result.kv.keepsApplied).toBeGreaterThan(16);
    // Each program compacts once (call 5) and ends: two drops each, applied where the engine still holds the context.
    expect(result.kv.dropsApplied).toBeGreaterThan(programs.length);
    expect(result.kv.hintsSent).toBeGreaterThanOrEqual(result.kv.keepsApplied + result.kv.normalsApplied + result.kv.dropsApplied);
    expect(result.kv.normalsApplied).toBeGreaterThan(0);
    expect(result.programsFinished).toBe(programs.length);
  });
});
