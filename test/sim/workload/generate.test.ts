import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { generatePrograms, parseWorkload, summariseWorkload, type Workload } from "../../../src/sim/workload/index.js";
import { loadWorkload } from "../../../src/sim/workload/load.js";
import { expectWellFormed } from "./invariants.js";

const mixed = await loadWorkload("mixed");

describe("generatePrograms", () => {
  it("is deterministic for a seed", () => {
    expect(generatePrograms(mixed, { count: 200 })).toEqual(generatePrograms(mixed, { count: 200 }));
    expect(generatePrograms({ ...mixed, seed: 9 }, { count: 50 })).toEqual(generatePrograms(mixed, { seed: 9, count: 50 }));
  });

  it("gives different programs for different seeds", () => {
    const a = generatePrograms(mixed, { seed: 1, count: 50 });
    const b = generatePrograms(mixed, { seed: 2, count: 50 });
    expect(a.map((p) => p.arrivalMs)).not.toEqual(b.map((p) => p.arrivalMs));
    expect(a.map((p) => p.calls.length)).not.toEqual(b.map((p) => p.calls.length));
    expect(a.map((p) => p.contentSeed)).not.toEqual(b.map((p) => p.contentSeed));
  });

  it("starts a longer run with the programs of a shorter one", () => {
    const short = generatePrograms(mixed, { count: 30 });
    expect(generatePrograms(mixed, { count: 60 }).slice(0, 30)).toEqual(short);
  });

  it.each(["chat", "function-calling", "tree-search", "coding-agent", "mixed"] as const)("builds well-formed call graphs for %s", async (name) => {
    const programs = generatePrograms(await loadWorkload(name), { count: name === "tree-search" ? 100 : 300 });
    for (const program of programs) expectWellFormed(program, program.kind === "coding-agent" ? 70_000 : Infinity);
  });

  it("draws Poisson arrivals at the configured rate", () => {
    const w = parseWorkload({ name: "p", arrival: { process: "poisson", ratePerSec: 4 }, programs: 4_000, mix: [{ kind: "chat" }] });
    const programs = generatePrograms(w);
    const gaps = programs.slice(1).map((p, i) => p.arrivalMs - (programs[i]?.arrivalMs ?? 0));
    const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((s, g) => s + (g - mean) ** 2, 0) / gaps.length);
    // Exponential gaps: mean 250 ms and a coefficient of variation of 1 (±3 standard errors).
    expect(mean).toBeGreaterThan(250 * 0.95);
    expect(mean).toBeLessThan(250 * 1.05);
    expect(sd / mean).toBeGreaterThan(0.93);
    expect(sd / mean).toBeLessThan(1.07);
    expect(summariseWorkload(programs).arrivalRatePerSec).toBeCloseTo(1_000 / mean, 6);
    expect(gaps.every((g) => g >= 0)).toBe(true);
  });

  it("stops a duration-bounded run at its end", () => {
    const w = parseWorkload({ name: "d", arrival: { process: "poisson", ratePerSec: 2 }, programs: { durationSec: 500 }, mix: [{ kind: "chat" }] });
    const programs = generatePrograms(w);
    expect(programs.length).toBeGreaterThan(1_000 * 0.9);
    expect(programs.length).toBeLessThan(1_000 * 1.1);
    expect(programs.every((p) => p.arrivalMs < 500_000)).toBe(true);
  });

  it("releases a batch at t = 0", () => {
    const w = parseWorkload({ name: "b", arrival: { process: "batch" }, programs: 20, mix: [{ kind: "tree-search" }] });
    const programs = generatePrograms(w);
    expect(programs).toHaveLength(20);
    expect(programs.every((p) => p.arrivalMs === 0)).toBe(true);
    expect(summariseWorkload(programs).arrivalRatePerSec).toBeUndefined();
  });

  it("gives a mirroring tenant a twin of each of its source's programs: the same calls at the same instant, text of its own", async () => {
    const churn = await loadWorkload("tenant-churn");
    const programs = generatePrograms(churn, { count: 60 });
    const honest = programs.filter((p) => p.tenantId === "ten_honest");
    const twins = programs.filter((p) => p.tenantId === "ten_churn");
    expect(honest.length).toBeGreaterThan(20);
    expect(twins).toHaveLength(honest.length);
    twins.forEach((twin, i) => {
      const original = honest[i]!;
      expect(twin).toMatchObject({ arrivalMs: original.arrivalMs, kind: original.kind, calls: original.calls });
      expect(twin.contentSeed).not.toBe(original.contentSeed);
      expect(twin.programId).not.toBe(original.programId);
    });
    // Ids and indexes stay in arrival order; the steady tenant's agents are 30 calls each.
    expect(programs.map((p) => p.index)).toEqual(programs.map((_, i) => i));
    expect(new Set(programs.map((p) => p.programId)).size).toBe(programs.length);
    expect(new Set(programs.filter((p) => p.tenantId === "ten_steady").map((p) => p.calls.length))).toEqual(new Set([30]));
  });

  it("follows the mix weights, tenants and system prompt ids", () => {
    const programs = generatePrograms(mixed, { count: 4_000 });
    const share = (kind: string) => programs.filter((p) => p.kind === kind).length / programs.length;
    // Weights 4:3:1:2.
    expect(share("chat")).toBeCloseTo(0.4, 1);
    expect(share("function-calling")).toBeCloseTo(0.3, 1);
    expect(share("tree-search")).toBeCloseTo(0.1, 1);
    expect(share("coding-agent")).toBeCloseTo(0.2, 1);
    const acme = programs.filter((p) => p.tenantId === "ten_acme").length / programs.length;
    expect(acme).toBeCloseTo(0.5, 1);
    expect(programs.every((p) => p.tenantId !== undefined)).toBe(true);
    const fc = programs.find((p) => p.kind === "function-calling");
    expect(fc?.calls[0]?.systemPromptId).toBe("function-calling.1");
    expect(fc?.calls[0]?.systemPromptTokens).toBe(1_024);

    const pinned = parseWorkload({ ...mixed, mix: [{ kind: "chat", tenantId: "ten_solo", systemPromptId: "support-bot", params: { systemPromptTokens: 300 } }] });
    const solo = generatePrograms(pinned, { count: 20 });
    expect(solo.every((p) => p.tenantId === "ten_solo" && p.calls.every((c) => c.systemPromptId === "support-bot" && c.systemPromptTokens === 300))).toBe(true);
  });

  it("shapes each kind's graph as described", () => {
    const fixed = (kind: string, params: object) =>
      generatePrograms(parseWorkload({ name: "s", arrival: { process: "batch" }, programs: 1, mix: [{ kind, params }] }))[0];

    const chat = fixed("chat", { callsPerProgram: 4, newPromptTokens: 10, outputTokens: 5, gapSec: 2 });
    expect(chat?.calls.map((c) => [c.dependsOn, c.contextTokens, c.gapBeforeMs])).toEqual([
      [[], 0, 0],
      [[0], 15, 2_000],
      [[1], 30, 2_000],
      [[2], 45, 2_000],
    ]);

    // Threads mode: one first call, then steps of 3 parallel calls that each join the whole previous step.
    const fcall = fixed("function-calling", { callsPerProgram: 7, fanOut: 3, newPromptTokens: 10, outputTokens: 5, gapSec: 1 });
    expect(fcall?.calls.map((c) => c.dependsOn)).toEqual([[], [0], [0], [0], [1, 2, 3], [1, 2, 3], [1, 2, 3]]);
    expect(fcall?.calls.map((c) => c.thread)).toEqual(["main", "main", "branch-1", "branch-2", "main", "branch-1", "branch-2"]);
    expect(fcall?.calls[4]?.contextCallIds).toEqual([0, 1, 2, 3]);

    // Tools mode: a chain whose gap is the slowest of the step's tool calls.
    const tools = fixed("function-calling", { callsPerProgram: 5, fanOut: 4, fanOutMode: "tools", gapSec: { dist: "uniform", min: 0, max: 1 } });
    expect(tools?.calls.map((c) => c.dependsOn)).toEqual([[], [0], [1], [2], [3]]);
    expect(tools?.calls.slice(1).every((c) => c.toolCalls === 4 && c.gapBeforeMs > 0 && c.gapBeforeMs <= 1_000)).toBe(true);

    // Tree search: 3 iterations of 5 children; each iteration waits for the previous one.
    const tree = fixed("tree-search", { iterations: 3, newPromptTokens: 10, outputTokens: 5 });
    expect(tree?.calls).toHaveLength(15);
    expect(tree?.calls.slice(5, 10).every((c) => c.dependsOn.join() === "0,1,2,3,4" && c.contextCallIds.length === 1)).toBe(true);
    expect(tree?.calls.slice(10).every((c) => c.dependsOn.join() === "5,6,7,8,9")).toBe(true);
  });

  it("compacts a coding agent's context at the cap, keeping the first prompt", () => {
    const w = parseWorkload({
      name: "c",
      arrival: { process: "batch" },
      programs: 1,
      mix: [{ kind: "coding-agent", params: { callsPerProgram: 60, firstPromptTokens: 4_000, newPromptTokens: 1_000, outputTokens: 200, fanOut: 1, contextCapTokens: 20_000, compactToFraction: 0.5, systemPromptTokens: 1_000 } }],
    });
    const [program] = generatePrograms(w);
    if (program === undefined) throw new Error("no program");
    expectWellFormed(program, 20_000);
    const lengths = program.calls.map((c) => c.systemPromptTokens + c.contextTokens + c.newPromptTokens);
    const drops = lengths.filter((n, i) => i > 0 && n < (lengths[i - 1] ?? 0));
    expect(drops.length).toBeGreaterThan(0);
    expect(Math.max(...lengths)).toBeLessThanOrEqual(20_000);
    expect(program.calls.every((c, i) => i === 0 || c.contextCallIds[0] === 0)).toBe(true);
    // Right after a compaction the prompt fits in half the cap.
    const after = lengths.findIndex((n, i) => i > 0 && n < (lengths[i - 1] ?? 0));
    expect(lengths[after]).toBeLessThanOrEqual(10_000);
  });

  it("keeps every call graph well formed for any knob settings", () => {
    const workload = fc.record({
      kind: fc.constantFrom("chat", "function-calling", "tree-search", "coding-agent"),
      calls: fc.integer({ min: 1, max: 40 }),
      fanOut: fc.integer({ min: 1, max: 6 }),
      mode: fc.constantFrom("threads", "tools"),
      system: fc.integer({ min: 0, max: 3_000 }),
      cap: fc.integer({ min: 1_000, max: 30_000 }),
      depth: fc.integer({ min: 1, max: 8 }),
      backtrack: fc.double({ min: 0, max: 1, noNaN: true }),
      seed: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    });
    fc.assert(
      fc.property(workload, ({ kind, calls, fanOut, mode, system, cap: extra, depth, backtrack, seed }) => {
        const cap = system + extra;
        const params: Record<string, Record<string, unknown>> = {
          chat: { callsPerProgram: { dist: "exponential", mean: calls, integer: true } },
          "function-calling": { callsPerProgram: calls, fanOut: { dist: "uniform", min: 1, max: fanOut, integer: true }, fanOutMode: mode },
          "tree-search": { iterations: { dist: "uniform", min: 1, max: Math.max(1, calls / 4), integer: true }, maxDepth: depth, backtrackProbability: backtrack },
          "coding-agent": { callsPerProgram: calls, fanOut, fanOutMode: mode, systemPromptTokens: system, contextCapTokens: cap },
        };
        const w: Workload = parseWorkload({ name: "prop", seed, arrival: { process: "poisson", ratePerSec: 1 }, programs: 5, mix: [{ kind, params: params[kind] }] });
        for (const program of generatePrograms(w)) expectWellFormed(program, kind === "coding-agent" ? cap : Infinity);
      }),
      { numRuns: 150 },
    );
  });

  it("rejects bad overrides", () => {
    expect(() => generatePrograms(mixed, { seed: -1 })).toThrow(RangeError);
    expect(() => generatePrograms(mixed, { count: 1.5 })).toThrow(RangeError);
  });
});
