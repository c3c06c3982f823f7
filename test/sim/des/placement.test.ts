import { describe, expect, it } from "vitest";
import { PLACEMENT_POLICY_NAMES } from "../../../src/sim/des/policies.js";
import { type CallRecord, simulate } from "../../../src/sim/des/simulate.js";
import { DEFAULT_TOOL_EVENT_SETTINGS, sendsToolEvents, toolArguments } from "../../../src/sim/des/tool-events.js";
import { waitInArgumentsMs } from "../../../src/core/tao/tool-args.js";
import { callSpec, programSpec } from "./programs.js";

/* The placement policies: "cache-aware" (SGLang's router) and "agentix-tao" (TAO's planner over Agentix's queue). */

const byCall = (calls: CallRecord[] | undefined) => new Map((calls ?? []).map((c) => [`${c.programId.slice(-1)}${c.callId}`, c]));

describe("placement policies on a small multi-tenant set", () => {
  const programs = () => {
    const calls = (n: number) =>
      Array.from({ length: n }, (_, k) =>
        callSpec(k, { dependsOn: k === 0 ? [] : [k - 1], gapBeforeMs: k === 0 ? 0 : 30 * k, contextCallIds: Array.from({ length: k }, (_, j) => j), contextTokens: 130 * k, outputTokens: 30 }),
      );
    return Array.from({ length: 16 }, (_, i) => programSpec(i, i * 40, calls(1 + (i % 4)), { tenantId: ["ten_a", "ten_b"][i % 2] as string, kind: i % 2 === 0 ? "coding-agent" : "function-calling" }));
  };

  it.each(PLACEMENT_POLICY_NAMES)("%s is deterministic, finishes every program and records first tokens", (policy) => {
    const config = { programs: programs(), policy, engines: 2, recordCalls: true };
    const first = simulate(config);
    const second = simulate(config);
    expect({ ...second, wallMs: 0 }).toEqual({ ...first, wallMs: 0 });
    expect(first.programs.every((p) => Number.isFinite(p.finishMs) && p.calls === p.plannedCalls)).toBe(true);
    for (const call of first.calls ?? []) {
      expect(call.firstTokenMs).toBeGreaterThan(call.dispatchMs);
      expect(call.firstTokenMs).toBeLessThanOrEqual(call.finishMs);
      expect(call.reason).toBeDefined();
    }
    expect(first.tao === undefined).toBe(policy !== "agentix-tao");
  });

  it("the other policies record first tokens and reasons too", () => {
    const result = simulate({ programs: programs(), policy: "agentix", engines: 2, recordCalls: true });
    expect(result.calls?.every((c) => c.firstTokenMs > c.dispatchMs && c.reason !== undefined)).toBe(true);
    expect(result.tao).toBeUndefined();
  });
});

describe("cache-aware (SGLang's router)", () => {
  it("sends a program back to the engine its prefix went to; a newcomer to the smallest tree", () => {
    const programs = [
      programSpec(1, 0, [
        callSpec(0, { newPromptTokens: 1_000, outputTokens: 20 }),
        callSpec(1, { dependsOn: [0], gapBeforeMs: 50, contextCallIds: [0], contextTokens: 1_020, newPromptTokens: 100, outputTokens: 20 }),
      ]),
      programSpec(2, 10, [callSpec(0, { newPromptTokens: 100, outputTokens: 2_000 })]),
    ];
    const result = simulate({ programs, policy: "cache-aware", engines: 2, recordCalls: true });
    const calls = byCall(result.calls);
    expect([calls.get("10"), calls.get("20"), calls.get("11")].map((c) => [c?.engineId, c?.reason])).toEqual([
      ["engine-0", "cache-smallest-tree"],
      ["engine-1", "cache-smallest-tree"],
      ["engine-0", "cache-match"],
    ]);
    // 62 full blocks of the first prompt were still cached.
    expect(calls.get("11")?.cachedTokens).toBe(992);
  });

  it("is the same run whatever the tree cap when the cap is never reached, and a tiny cap forgets", () => {
    const programs = [
      programSpec(1, 0, [
        callSpec(0, { newPromptTokens: 1_000, outputTokens: 20 }),
        callSpec(1, { dependsOn: [0], gapBeforeMs: 50, contextCallIds: [0], contextTokens: 1_020, newPromptTokens: 100, outputTokens: 20 }),
      ]),
      programSpec(2, 10, [callSpec(0, { newPromptTokens: 100, outputTokens: 2_000 })]),
    ];
    const tiny = simulate({ programs, policy: "cache-aware", engines: 2, recordCalls: true, prefixTree: { maxBlocksPerEngine: 4 } });
    expect(byCall(tiny.calls).get("11")?.reason).toBe("cache-smallest-tree");
  });
});

describe("agentix-tao", () => {
  // P's calls are short (under 2,048 tokens) and extend each other; Q, a long call,
  // arrives on engine-0 after P's first call finished there and before P's second is due.
  const programs = [
    programSpec(1, 0, [
      callSpec(0, { newPromptTokens: 600, outputTokens: 20 }),
      callSpec(1, { dependsOn: [0], gapBeforeMs: 50, contextCallIds: [0], contextTokens: 620, newPromptTokens: 600, outputTokens: 20 }),
    ]),
    programSpec(2, 160, [callSpec(0, { newPromptTokens: 100, outputTokens: 2_000 })]),
  ];

  it("keeps a program on the engine that holds its cache where per-call routing moves it", () => {
    const agentix = byCall(simulate({ programs, policy: "agentix", engines: 2, recordCalls: true }).calls);
    const tao = simulate({ programs, policy: "agentix-tao", engines: 2, recordCalls: true });
    const taoCalls = byCall(tao.calls);
    expect(agentix.get("10")?.engineId).toBe("engine-0");
    expect(agentix.get("20")?.engineId).toBe("engine-0");
    // Agentix: a short prompt goes to the least-loaded engine, away from its cache.
    expect(agentix.get("11")).toMatchObject({ engineId: "engine-1", reason: "short-least-loaded", cachedTokens: 0 });
    // TAO: the program's cache credit on engine-0 decides; engine-0 has room.
    expect(taoCalls.get("10")?.engineId).toBe("engine-0");
    expect(taoCalls.get("20")?.engineId).toBe("engine-0");
    // The first prompt's 37 full blocks (the engine's own output text differs from the program's replay).
    expect(taoCalls.get("11")).toMatchObject({ engineId: "engine-0", reason: "tao-plan", cachedTokens: 592 });
    const ttft = (c: CallRecord | undefined) => (c === undefined ? Number.NaN : c.firstTokenMs - c.readyMs);
    expect(ttft(taoCalls.get("11"))).toBeLessThan(ttft(agentix.get("11")));
    expect(tao.tao?.plans).toBeGreaterThan(0);
    expect(tao.tao?.dispatches.planned).toBe(3);
    expect(tao.tao?.reservations.made).toBe(0);
  });

  it("holds a slot on the cache engine for a program whose tool says it ends soon, and the call takes it", () => {
    const coding = [
      programSpec(1, 0, [callSpec(0, { newPromptTokens: 3_000, outputTokens: 20 }), callSpec(1, { dependsOn: [0], gapBeforeMs: 600, toolCalls: 1, contextCallIds: [0], contextTokens: 3_020, newPromptTokens: 100, outputTokens: 20 })], { kind: "coding-agent" }),
    ];
    const result = simulate({ programs: coding, policy: "agentix-tao", engines: 2, recordCalls: true, tao: { toolEvents: { eventShare: 1, sleepArgumentShare: 1 } } });
    const calls = byCall(result.calls);
    expect(calls.get("11")).toMatchObject({ engineId: calls.get("10")?.engineId, reason: "tao-reserved" });
    expect(calls.get("11")?.cachedTokens).toBe(2_992);
    expect(result.tao?.reservations).toEqual({ made: 1, used: 1, expired: 0, released: 0 });
    expect(result.tao?.eventPrograms).toBe(1);
    // The sleep in the arguments predicted the tool; the client's finish event was in force at arrival.
    expect(result.tao?.readiness.atToolStart["tool-arguments"].count).toBe(1);
    expect(result.tao?.readiness.atToolStart["tool-arguments"].withinToleranceShare).toBe(1);
    expect(result.tao?.readiness.inForceAtArrival["tool-finished"]).toMatchObject({ count: 1, meanAbsErrorMs: 0 });

    // Without reservations the same call is placed by a plan, on the same engine (its credit).
    const plain = simulate({ programs: coding, policy: "agentix-tao", engines: 2, recordCalls: true, tao: { reservationTtlMs: 0, toolEvents: { eventShare: 0, sleepArgumentShare: 1 } } });
    expect(byCall(plain.calls).get("11")).toMatchObject({ engineId: calls.get("10")?.engineId, reason: "tao-plan" });
    expect(plain.tao?.reservations.made).toBe(0);
    expect(plain.tao?.eventPrograms).toBe(0);
  });

  it("holds a program the plan left out for want of KV instead of overfilling the engine, and routes it once overdue", () => {
    // Three 128k-token contexts on one engine whose plannable KV (the admission target, 90 % of 420,800) holds two.
    const big = [0, 1, 2].map((i) => programSpec(i, i, [callSpec(0, { newPromptTokens: 128_000, outputTokens: 1_000 })]));
    const run = (holdLeftOutMs: number) => {
      const result = simulate({ programs: big, policy: "agentix-tao", engines: 1, recordCalls: true, tao: { holdLeftOutMs } });
      const calls = byCall(result.calls);
      return { result, first: calls.get("00"), third: calls.get("20") };
    };
    const held = run(60_000);
    // The third waits for the first to end, then goes by a plan; nothing was preempted.
    expect(held.third?.dispatchMs).toBeGreaterThanOrEqual(held.first?.finishMs ?? Number.POSITIVE_INFINITY);
    expect(held.third?.reason).toBe("tao-plan");
    expect(held.result.engines.reduce((n, e) => n + e.preemptions, 0)).toBe(0);
    expect(held.result.tao?.heldMax).toBe(1);
    // Overdue (a 1 s hold, or 0: at once) it goes by routing, but through the same KV
    // account routing's admission keeps: still not before the first call ends, never
    // overfilling the engine.
    for (const holdMs of [1_000, 0]) {
      const overdue = run(holdMs);
      expect(overdue.third?.dispatchMs).toBeGreaterThanOrEqual(overdue.first?.finishMs ?? Number.POSITIVE_INFINITY);
      expect(overdue.result.engines.reduce((n, e) => n + e.preemptions, 0)).toBe(0);
    }
    expect(run(0).result.tao?.heldMax).toBe(0);
  });

  it("rejects bad options", () => {
    const base = { programs, policy: "agentix-tao" as const, engines: 1 };
    expect(() => simulate({ ...base, tao: { replanIntervalMs: -1 } })).toThrow(/replanIntervalMs/);
    expect(() => simulate({ ...base, tao: { reservationTtlMs: Number.NaN } })).toThrow(/reservationTtlMs/);
    expect(() => simulate({ ...base, tao: { holdLeftOutMs: -1 } })).toThrow(/holdLeftOutMs/);
    expect(() => simulate({ ...base, tao: { toolEvents: { eventShare: 2 } } })).toThrow(/eventShare/);
  });

  it("re-validates a plan it reuses between replans, and still finishes everything", () => {
    const many = Array.from({ length: 12 }, (_, i) =>
      programSpec(i, i * 5, [callSpec(0, { newPromptTokens: 2_000, outputTokens: 40 }), callSpec(1, { dependsOn: [0], gapBeforeMs: 20, contextCallIds: [0], contextTokens: 2_040, outputTokens: 40 })]),
    );
    const result = simulate({ programs: many, policy: "agentix-tao", engines: 2, maxInFlightPerEngine: 2, tao: { replanIntervalMs: 200 } });
    expect(result.programs.every((p) => Number.isFinite(p.finishMs))).toBe(true);
    expect(result.tao?.plansReused).toBeGreaterThan(0);
    const skipped = Object.values(result.tao?.skipped ?? {}).reduce((a, b) => a + b, 0);
    expect(skipped + (result.tao?.blocked ?? 0)).toBeGreaterThan(0);
  });
});

describe("tool events", () => {
  const program = programSpec(3, 0, [callSpec(0), callSpec(1, { dependsOn: [0], gapBeforeMs: 8_000, toolCalls: 1 })], { kind: "coding-agent" });
  const call = program.calls[1] as (typeof program.calls)[number];

  it("gives a share of coding-agent tool runs a sleep of 50-100 % of the tool time", () => {
    const wait = waitInArgumentsMs(toolArguments(program, call, { eventShare: 0, sleepArgumentShare: 1 }));
    expect(wait).toBeGreaterThanOrEqual(4_000);
    expect(wait).toBeLessThanOrEqual(8_000);
    expect(waitInArgumentsMs(toolArguments(program, call, { eventShare: 0, sleepArgumentShare: 0 }))).toBeUndefined();
    expect(waitInArgumentsMs(toolArguments({ ...program, kind: "function-calling" }, call, { eventShare: 0, sleepArgumentShare: 1 }))).toBeUndefined();
  });

  it("picks the programs that send events by share, deterministically", () => {
    expect(sendsToolEvents(program, { ...DEFAULT_TOOL_EVENT_SETTINGS, eventShare: 1 })).toBe(true);
    expect(sendsToolEvents(program, { ...DEFAULT_TOOL_EVENT_SETTINGS, eventShare: 0 })).toBe(false);
    const share = Array.from({ length: 400 }, (_, i) => programSpec(i, 0, [])).filter((p) => sendsToolEvents(p, DEFAULT_TOOL_EVENT_SETTINGS)).length / 400;
    expect(share).toBeGreaterThan(0.4);
    expect(share).toBeLessThan(0.6);
  });
});
