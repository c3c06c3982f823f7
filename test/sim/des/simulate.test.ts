import { describe, expect, it } from "vitest";
import { POLICY_NAMES } from "../../../src/sim/des/policies.js";
import { type CallRecord, type SimulationResult, simulate } from "../../../src/sim/des/simulate.js";
import { generatePrograms } from "../../../src/sim/workload/generate.js";
import { loadWorkload } from "../../../src/sim/workload/load.js";
import { callSpec, handAlone, handStep, programSpec } from "./programs.js";

const finishOf = (result: SimulationResult, programId: string) => result.programs.find((p) => p.programId === programId)?.finishMs;
const dispatchOrder = (calls: CallRecord[] | undefined) => (calls ?? []).map((c) => `${c.programId.slice(-1)}${c.callId}`);

describe("one engine, hand-checked timing", () => {
  it("fcfs-rr: a request submitted mid-step joins the next step and batches with the running one", () => {
    // A (prompt 100, 3 tokens) at 0; B (prompt 100, 3 tokens) at 3 ms, during A's prefill.
    const programs = [
      programSpec(1, 0, [callSpec(0, { newPromptTokens: 100, outputTokens: 3 })]),
      programSpec(2, 3, [callSpec(0, { newPromptTokens: 100, outputTokens: 3 })]),
    ];
    // Service as the relay measures time (dispatch to finish); "work" is checked below.
    const result = simulate({ programs, policy: "fcfs-rr", engines: 1, recordCalls: true, service: "wall" });

    const s1 = handStep([{ ahead: 0, tokens: 100 }], []); // A's prefill: first token
    const s2 = handStep([{ ahead: 0, tokens: 100 }], [101]); // B's prefill + A's decode at context 101
    const s3 = handStep([], [102, 101]); // A's third token (done), B's second
    const s4 = handStep([], [102]); // B's third token (done)
    const t1 = s1;
    const t2 = t1 + s2;
    const t3 = t2 + s3;
    const t4 = t3 + s4;
    // s1 = max(7, 0.029 · 101) + 1.18e-6 · 100 · 50 + 0.076e-3 · 100 + 4.4e-3 = 7.0179 ms
    expect(s1).toBeCloseTo(7.0179, 9);
    expect(finishOf(result, "prog_test001")).toBeCloseTo(t3, 9);
    expect(finishOf(result, "prog_test002")).toBeCloseTo(t4, 9);

    const [a, b] = result.programs;
    expect(a).toMatchObject({ calls: 1, generatedTokens: 3, promptTokens: 100, cachedTokens: 0, poolQueueMs: 0, preemptions: 0 });
    expect(a?.queueMs).toBe(0);
    expect(a?.serviceMs).toBeCloseTo(t3, 9);
    // B waited in the engine from 3 ms to the start of the step that prefilled it.
    expect(b?.queueMs).toBeCloseTo(t1 - 3, 9);
    expect(b?.serviceMs).toBeCloseTo(t4 - 3, 9);
    expect(result.engines[0]).toMatchObject({ engineId: "engine-0", steps: 4, generationTokens: 6, promptTokens: 200 });
    // By default a call's service is its standalone work: A's and B's are equal though B waited and shared steps.
    const work = simulate({ programs, policy: "fcfs-rr", engines: 1 });
    const alone = handAlone(0, 100, 3);
    expect(work.programs.map((p) => p.serviceMs)).toEqual([expect.closeTo(alone, 9), expect.closeTo(alone, 9)]);
    expect(b?.serviceMs).toBeGreaterThan(alone + 1);
    expect(result.engines[0]?.busyMs).toBeCloseTo(t4, 9);
    expect(result.simEndMs).toBeCloseTo(t4, 9);
    expect(result.truncated).toBe(false);
  });

  // A0 (long) runs first; F arrives at 10 ms and waits; when A0 ends, A1 is ready and
  // F0 runs (first come, level 0 under both); B arrives while F0 runs. When F0 ends,
  // FCFS takes A1 (queued before B0), PLAS takes B0 (its program has no service yet,
  // A has over 1 s: level 1).
  const handCase = () => {
    const t1 = handAlone(0, 100, 200); // A0 ends
    const t2 = handAlone(t1, 100, 50); // F0 ends
    const programs = [
      programSpec(1, 0, [callSpec(0, { outputTokens: 200 }), callSpec(1, { dependsOn: [0], outputTokens: 10 })]),
      programSpec(2, 10, [callSpec(0, { outputTokens: 50 })]),
      programSpec(3, t1 + 50, [callSpec(0, { outputTokens: 10 })]),
    ];
    return { t1, t2, programs };
  };

  it("request-mlq (FCFS pool queue, buffer 1): the older call goes first, exactly on time", () => {
    const { t1, t2, programs } = handCase();
    // 200 tokens at ~7 ms: A's service passes the 1 s bound of level 0.
    expect(t1).toBeGreaterThan(1_000);
    expect(t2).toBeGreaterThan(t1 + 50);
    const result = simulate({ programs, policy: "request-mlq", engines: 1, maxInFlightPerEngine: 1, recordCalls: true });
    expect(dispatchOrder(result.calls)).toEqual(["10", "20", "11", "30"]);
    const t3 = handAlone(t2, 100, 10);
    const t4 = handAlone(t3, 100, 10);
    expect(finishOf(result, "prog_test001")).toBeCloseTo(t3, 9);
    expect(finishOf(result, "prog_test002")).toBeCloseTo(t2, 9);
    expect(finishOf(result, "prog_test003")).toBeCloseTo(t4, 9);
    // Pool queue time: F waited from 10 ms to t1, A1 from t1 to t2, B0 from t1 + 50 to t3.
    const queue = result.programs.map((p) => p.poolQueueMs);
    expect(queue[0]).toBeCloseTo(t2 - t1, 9);
    expect(queue[1]).toBeCloseTo(t1 - 10, 9);
    expect(queue[2]).toBeCloseTo(t3 - (t1 + 50), 9);
    expect(result.calls?.map((c) => c.level)).toEqual([0, 0, 0, 0]);
  });

  it("plas (buffer 1): the new program's call overtakes the long program's", () => {
    const { t1, t2, programs } = handCase();
    const result = simulate({ programs, policy: "plas", engines: 1, maxInFlightPerEngine: 1, recordCalls: true });
    expect(dispatchOrder(result.calls)).toEqual(["10", "20", "30", "11"]);
    expect(result.calls?.map((c) => c.level)).toEqual([0, 0, 0, 1]);
    const t3 = handAlone(t2, 100, 10);
    const t4 = handAlone(t3, 100, 10);
    expect(finishOf(result, "prog_test003")).toBeCloseTo(t3, 9);
    expect(finishOf(result, "prog_test001")).toBeCloseTo(t4, 9);
    // PLAS value at the end: the two calls' service (dispatch → finish).
    expect(result.programs[0]?.serviceMs).toBeCloseTo(t1 + (t4 - t3), 9);
  });
});

describe("metrics scrapes, as the pool's engine monitor", () => {
  // A 2,000-token prefill runs 440 → ~500.5 ms; ten short calls sent at 480 ms wait in the
  // engine behind it, so the scrape at 500 ms reads 10 waiting (over 4: saturated), though
  // the next step takes them all. A call arriving at 505 ms is held in the pool until a
  // reading says otherwise.
  const programs = [
    programSpec(0, 440, [callSpec(0, { newPromptTokens: 2_000, outputTokens: 200 })]),
    ...Array.from({ length: 10 }, (_, i) => programSpec(1 + i, 480, [callSpec(0, { outputTokens: 50 })])),
    programSpec(11, 505, [callSpec(0)]),
  ];
  const heldCall = (saturatedMetricsIntervalMs?: number) =>
    simulate({ programs, policy: "agentix", engines: 1, recordCalls: true, ...(saturatedMetricsIntervalMs === undefined ? {} : { saturatedMetricsIntervalMs }) }).calls?.find(
      (c) => c.programId === "prog_test011",
    );

  it("re-reads a saturated engine after 50 ms, releasing the held call then", () => {
    expect(heldCall()?.dispatchMs).toBe(550);
  });

  it("without the early re-read, holds it until the next regular scrape", () => {
    expect(heldCall(500)?.dispatchMs).toBe(1_000);
  });
});

describe("program accounting", () => {
  it("ATLAS value of a fan-out program equals its critical path; PLAS value is the sum", () => {
    const calls = [
      callSpec(0, { outputTokens: 20 }),
      callSpec(1, { dependsOn: [0], thread: "main", outputTokens: 10 }),
      callSpec(2, { dependsOn: [0], thread: "branch-1", outputTokens: 30 }),
      callSpec(3, { dependsOn: [0], thread: "branch-2", outputTokens: 20, gapBeforeMs: 5 }),
      callSpec(4, { dependsOn: [1, 2, 3], outputTokens: 5, gapBeforeMs: 100 }),
    ];
    const program = programSpec(1, 0, calls, { kind: "tree-search" });
    const result = simulate({ programs: [program], policy: "atlas", engines: 1, recordCalls: true, service: "wall" });
    const records = result.calls ?? [];
    const service = new Map(records.map((c) => [c.callId, c.finishMs - c.dispatchMs]));
    // Longest service path through the DAG.
    const longest: number[] = [];
    for (const call of calls) {
      const before = Math.max(0, ...call.dependsOn.map((d) => longest[d] ?? 0));
      longest[call.callId] = before + (service.get(call.callId) ?? Number.NaN);
    }
    const record = result.programs[0];
    expect(record?.criticalPathMs).toBeCloseTo(longest[4] as number, 9);
    expect(record?.serviceMs).toBeCloseTo([...service.values()].reduce((a, b) => a + b, 0), 9);
    // The siblings ran together, so the sum is well above the path.
    expect(record?.serviceMs).toBeGreaterThan((record?.criticalPathMs ?? 0) * 1.3);
    // Each call recorded the program's path value when it was issued.
    const s = (id: number) => service.get(id) ?? Number.NaN;
    expect(records.map((c) => c.startValueMs)).toEqual([0, s(0), s(0), s(0), expect.closeTo(s(0) + Math.max(s(1), s(2), s(3)), 9)]);
    // Ready times follow the dependencies and gaps.
    const ready = new Map(records.map((c) => [c.callId, c]));
    expect(ready.get(3)?.readyMs).toBeCloseTo((ready.get(0)?.finishMs ?? 0) + 5, 9);
    const lastSibling = Math.max(...[1, 2, 3].map((id) => ready.get(id)?.finishMs ?? 0));
    expect(ready.get(4)?.readyMs).toBeCloseTo(lastSibling + 100, 9);
    expect(record?.finishMs).toBe(ready.get(4)?.finishMs);
  });

  it("the oracle beats FCFS at the same buffer when a long program's calls are queued first", () => {
    // A: five parallel 100-token calls at 0; three one-call programs at 1, 2, 3 ms.
    const long = programSpec(
      0,
      0,
      Array.from({ length: 5 }, (_, k) => callSpec(k, { thread: k === 0 ? "main" : `branch-${k}`, outputTokens: 100 })),
      { kind: "tree-search" },
    );
    const shorts = [1, 2, 3].map((i) => programSpec(i, i, [callSpec(0, { outputTokens: 10 })]));
    const programs = [long, ...shorts];
    const mean = (r: SimulationResult) => r.programs.reduce((sum, p) => sum + (p.finishMs - p.arrivalMs), 0) / r.programs.length;
    const fcfs = simulate({ programs, policy: "request-mlq", engines: 1, maxInFlightPerEngine: 1 });
    const oracle = simulate({ programs, policy: "oracle", engines: 1, maxInFlightPerEngine: 1, recordCalls: true });
    expect(mean(oracle)).toBeLessThan(mean(fcfs));
    // The short programs ran right after the call already on the engine.
    expect(dispatchOrder(oracle.calls)).toEqual(["00", "10", "20", "30", "01", "02", "03", "04"]);
    // The same work in another order: the last program finishes at the same time (the engine never idles).
    expect(oracle.simEndMs).toBeCloseTo(fcfs.simEndMs, 6);
    expect(finishOf(oracle, long.programId)).toBeCloseTo(fcfs.simEndMs, 6);
  });
});

describe("routing of the direct policies", () => {
  // Calls at 0, 1, 2, 3 ms (the one at 1 ms is long), and one at 500 ms.
  const programs = [
    ...Array.from({ length: 4 }, (_, i) => programSpec(i, i, [callSpec(0, { outputTokens: i === 1 ? 100 : 5 })])),
    programSpec(9, 500, [callSpec(0)]),
  ];

  it("fcfs-rr cycles over the engines", () => {
    const result = simulate({ programs, policy: "fcfs-rr", engines: 3, recordCalls: true });
    expect(result.calls?.map((c) => c.engineId)).toEqual(["engine-0", "engine-1", "engine-2", "engine-0", "engine-1"]);
  });

  it("fcfs-least-loaded sends each call to the engine with the fewest outstanding calls", () => {
    const result = simulate({ programs, policy: "fcfs-least-loaded", engines: 3, recordCalls: true });
    // Ties go to the lowest id; at 500 ms only engine-1's long call is still running.
    expect(result.calls?.map((c) => c.engineId)).toEqual(["engine-0", "engine-1", "engine-2", "engine-0", "engine-0"]);
    expect(result.calls?.map((c) => c.dispatchMs)).toEqual([0, 1, 2, 3, 500]);
  });
});

describe("runs of a small multi-tenant set", () => {
  const programs = () => {
    // Mixed kinds, three tenants, quick arrivals so queues form.
    const calls = (n: number, thread = "main") => Array.from({ length: n }, (_, k) => callSpec(k, { thread, dependsOn: k === 0 ? [] : [k - 1], contextCallIds: [], outputTokens: 20 + ((k * 37) % 60) }));
    return Array.from({ length: 24 }, (_, i) =>
      programSpec(i, i * 40, calls(1 + (i % 5)), { tenantId: ["ten_a", "ten_b", "ten_c"][i % 3] as string }),
    );
  };

  it.each(POLICY_NAMES)("%s is deterministic and finishes every program", (policy) => {
    const config = { programs: programs(), policy, engines: 2, tenantWeights: { ten_a: 3, ten_b: 2 }, recordCalls: true };
    const first = simulate(config);
    const second = simulate(config);
    expect({ ...second, wallMs: 0 }).toEqual({ ...first, wallMs: 0 });
    expect(first.programs.every((p) => Number.isFinite(p.finishMs) && p.calls === p.plannedCalls)).toBe(true);
    expect(first.calls).toHaveLength(config.programs.reduce((n, p) => n + p.calls.length, 0));
    const busy = first.engines.reduce((sum, e) => sum + e.busyMs, 0);
    expect(busy).toBeGreaterThan(0);
    expect(busy).toBeLessThanOrEqual(2 * first.simEndMs + 1e-6);
  });

  it("truncates at maxSimMs: unfinished programs have finishMs NaN", () => {
    const result = simulate({ programs: programs(), policy: "agentix", engines: 1, maxSimMs: 600 });
    expect(result.truncated).toBe(true);
    expect(result.simEndMs).toBe(600);
    const unfinished = result.programs.filter((p) => Number.isNaN(p.finishMs));
    expect(unfinished.length).toBeGreaterThan(0);
    expect(unfinished.every((p) => p.calls < p.plannedCalls)).toBe(true);
    expect(result.programs.some((p) => Number.isFinite(p.finishMs))).toBe(true);
    expect(result.engines[0]?.busyMs).toBeLessThanOrEqual(600);
    expect(result.engines[0]?.busyMs).toBeGreaterThan(500);
  });

  it("reports progress, at most about once per percent", () => {
    const seen: number[] = [];
    const result = simulate({ programs: programs(), policy: "plas", engines: 2, onProgress: (p) => seen.push(p.finishedPrograms) });
    expect(seen.at(-1)).toBe(result.programs.length);
    expect(seen.length).toBeLessThanOrEqual(102);
    expect([...seen].sort((a, b) => a - b)).toEqual(seen);
  });
});

describe("a generated workload", () => {
  it("gives the same result for the same seed, and another for another seed", async () => {
    const workload = await loadWorkload("mixed");
    const busy = { ...workload, arrival: { process: "poisson" as const, ratePerSec: 2 } };
    const run = (seed: number) => simulate({ programs: generatePrograms(busy, { seed, count: 30 }), policy: "agentix", engines: 2, maxSimMs: 120_000 });
    const first = run(3);
    const again = run(3);
    expect({ ...again, wallMs: 0 }).toEqual({ ...first, wallMs: 0 });
    expect(first.events).toBeGreaterThan(1_000);
    expect(first.programs.some((p) => Number.isFinite(p.finishMs))).toBe(true);
    const other = run(4);
    expect(other.programs.map((p) => p.finishMs)).not.toEqual(first.programs.map((p) => p.finishMs));
    // Programs re-send their context: the engines' prefix caches hit.
    const hits = first.engines.reduce((sum, e) => sum + e.prefixCacheHits, 0);
    expect(hits).toBeGreaterThan(0);
    expect(first.programs.reduce((sum, p) => sum + p.cachedTokens, 0)).toBeGreaterThan(0);
  });
});

describe("input validation", () => {
  const ok = { programs: [programSpec(0, 0, [callSpec(0)])], policy: "agentix" as const, engines: 1 };
  it.each([
    [{ ...ok, engines: 0 }, /engines/],
    [{ ...ok, policy: "lifo" as "agentix" }, /policy/],
    [{ ...ok, maxSimMs: 0 }, /maxSimMs/],
    [{ ...ok, maxInFlightPerEngine: 0 }, /maxInFlightPerEngine/],
    [{ ...ok, programs: [ok.programs[0], ok.programs[0]] }, /duplicate/],
    [{ ...ok, programs: [programSpec(0, 0, [callSpec(0, { dependsOn: [0] })])] }, /depends/],
    [{ ...ok, tenantWeights: { ten_a: 0 } }, /weight/],
    [{ ...ok, saturatedMetricsIntervalMs: 0 }, /saturatedMetricsIntervalMs/],
  ])("rejects a bad config (%#)", (config, message) => {
    expect(() => simulate(config as Parameters<typeof simulate>[0])).toThrow(message);
  });

  it("names the call an engine refuses", () => {
    const tooLong = programSpec(0, 0, [callSpec(0, { newPromptTokens: 131_072 })]);
    expect(() => simulate({ ...ok, programs: [tooLong] })).toThrow(/prog_test000\/0 refused by the engine: .*maximum context length/);
  });

  it("finishes an empty program set at once", () => {
    expect(simulate({ ...ok, programs: [] })).toMatchObject({ programs: [], events: 0, simEndMs: 0, truncated: false });
  });
});

describe("measurement (the steady-state benchmark's probes)", () => {
  // Three single-call programs on one engine: A at 0 and B at 3 ms batch together, C arrives at 500 ms alone.
  const three = () => [
    programSpec(1, 0, [callSpec(0, { newPromptTokens: 100, outputTokens: 3 })]),
    programSpec(2, 3, [callSpec(0, { newPromptTokens: 100, outputTokens: 3 })]),
    programSpec(3, 500, [callSpec(0, { newPromptTokens: 100, outputTokens: 20 })]),
  ];

  it("accumulates batch size and KV use per step, over the run and inside the window", () => {
    const result = simulate({ programs: three(), policy: "fcfs-rr", engines: 1, window: { startMs: 400, endMs: 100_000 } });
    const e = result.engines[0];
    if (e === undefined) throw new Error("no engine");
    // Steps of A and B (1, 2, 2, 1 sequences, as in the hand-checked case above), then C's 20 alone.
    const s1 = handStep([{ ahead: 0, tokens: 100 }], []);
    const s2 = handStep([{ ahead: 0, tokens: 100 }], [101]);
    const s3 = handStep([], [102, 101]);
    const s4 = handStep([], [102]);
    const before = s1 + s2 + s3 + s4;
    expect(e.batchMs).toBeCloseTo(s1 + 2 * s2 + 2 * s3 + s4 + (e.busyMs - before), 9);
    expect(e.batchMax).toBe(2);
    expect(e.window?.busyMs).toBeCloseTo(e.busyMs - before, 9);
    // Inside the window only C ran: batch 1 in every step.
    expect(e.window?.batchMs).toBeCloseTo(e.window?.busyMs ?? Number.NaN, 9);
    expect(e.window?.batchMax).toBe(1);
    expect(e.window?.steps).toBe(20);
    expect(e.kvMax).toBeGreaterThan(0);
    expect(e.kvMs).toBeGreaterThan(0);
  });

  it("samples the pool's state on a grid through the window's start", () => {
    const result = simulate({ programs: three(), policy: "fcfs-rr", engines: 1, window: { startMs: 250, endMs: 750 }, sampleEveryMs: 100 });
    const samples = result.samples ?? [];
    // C runs from 500 ms for ~140 ms; the run ends with it, before 650.
    expect(result.simEndMs).toBeGreaterThan(600);
    expect(result.simEndMs).toBeLessThan(650);
    expect(samples.map((s) => s.atMs)).toEqual([50, 150, 250, 350, 450, 550]);
    // A and B finished within ~30 ms.
    expect(samples.find((s) => s.atMs === 50)?.programsInSystem).toBe(0);
    const during = samples.find((s) => s.atMs === 550);
    expect(during?.programsInSystem).toBe(1);
    expect(during?.engineRunning).toBe(1);
    expect(during?.kvUsage).toBeGreaterThan(0);
  });

  it("ends when the watched programs have finished, leaving the others unfinished", () => {
    const result = simulate({ programs: three(), policy: "fcfs-rr", engines: 1, endWhenFinished: ["prog_test001", "prog_test002"] });
    expect(result.endedBy).toBe("watched-finished");
    expect(result.truncated).toBe(false);
    expect(Number.isFinite(result.programs[1]?.finishMs)).toBe(true);
    expect(Number.isNaN(result.programs[2]?.finishMs)).toBe(true);
    expect(result.simEndMs).toBe(result.programs[1]?.finishMs);
    expect(simulate({ programs: three(), policy: "fcfs-rr", engines: 1 }).endedBy).toBe("all-finished");
    expect(simulate({ programs: three(), policy: "fcfs-rr", engines: 1, maxSimMs: 100 }).endedBy).toBe("time-cap");
    expect(() => simulate({ programs: three(), policy: "fcfs-rr", engines: 1, endWhenFinished: ["prog_nope"] })).toThrow(/unknown program/);
  });

  it("watching changes nothing it watches", async () => {
    const workload = await loadWorkload("mixed");
    const programs = generatePrograms({ ...workload, arrival: { process: "poisson", ratePerSec: 1 } }, { seed: 5, count: 20 });
    const plain = simulate({ programs, policy: "agentix", engines: 2, recordCalls: true, maxSimMs: 300_000 });
    const watched = simulate({ programs, policy: "agentix", engines: 2, recordCalls: true, maxSimMs: 300_000, window: { startMs: 5_000, endMs: 15_000 }, sampleEveryMs: 250 });
    expect(watched.programs).toEqual(plain.programs);
    expect(watched.calls).toEqual(plain.calls);
    expect((watched.samples ?? []).length).toBeGreaterThan(100);
  });

  it("rejects a bad window or sample period", () => {
    const ok = { programs: three(), policy: "fcfs-rr" as const, engines: 1 };
    expect(() => simulate({ ...ok, window: { startMs: 10, endMs: 10 } })).toThrow(/window/);
    expect(() => simulate({ ...ok, sampleEveryMs: 0 })).toThrow(/sampleEveryMs/);
  });
});

describe("a tenant that opens a new program for every call", () => {
  // Three sequential calls of 300 output tokens (~2 s each alone): an honest program's later calls climb levels.
  const chain = [0, 1, 2].map((i) => callSpec(i, { dependsOn: i === 0 ? [] : [i - 1], contextCallIds: i === 0 ? [] : [i - 1], outputTokens: 300 }));
  const programs = [programSpec(1, 0, chain, { tenantId: "ten_honest" }), programSpec(2, 0, chain, { tenantId: "ten_churn" })];

  it("reaches the pool as one-call programs with no history: every call at the top level", () => {
    const result = simulate({ programs, policy: "atlas", engines: 1, recordCalls: true, churnTenants: ["ten_churn"] });
    const levels = (programId: string) => (result.calls ?? []).filter((c) => c.programId === programId).map((c) => c.level);
    expect(levels("prog_test002")).toEqual([0, 0, 0]);
    expect(Math.max(...levels("prog_test001"))).toBeGreaterThan(0);
    // Records stay per simulated program: the churned one finished its three calls.
    expect(result.programs.map((p) => p.calls)).toEqual([3, 3]);
    // Without churn both climb alike.
    const honest = simulate({ programs, policy: "atlas", engines: 1, recordCalls: true });
    expect((honest.calls ?? []).filter((c) => c.programId === "prog_test002").map((c) => c.level)).toEqual(levels("prog_test001"));
  });

  it("is refused with TAO placement, whose tool signals follow the simulated program", () => {
    expect(() => simulate({ programs, policy: "agentix-tao", engines: 1, churnTenants: ["ten_churn"] })).toThrow(/churnTenants is not supported with agentix-tao/);
  });
});
