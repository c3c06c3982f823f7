import { describe, expect, it } from "vitest";
import { callStartValue, completeCall, NO_SERVICE, type ProgramService } from "../../src/core/service.js";
import { statsFromHeaders } from "../../src/protocol/stats.js";
import { DEFAULT_SIM_MODEL } from "../../src/sim/engine-server.js";
import { signedCall, useSimEnginePool } from "./helpers.js";

/*
 * Tenant fairness with the pool and a simulated engine in the loop: tenant A opens
 * a new program on every call (so each of its calls has no program history and sits
 * in the top level), while tenant B runs one steady agent. Inside a level the pool
 * serves tenants by decayed service / weight, so B is not stuck behind A's flood.
 */

const sim = useSimEnginePool({ maxInFlight: 2, timeScale: 10 });

async function call(tenant: string, program: string, service: ProgramService, maxTokens: number) {
  const signed = await signedCall({
    fields: { tenant, program, serviceMs: Math.round(service.attainedServiceMs), pathMs: Math.round(service.criticalPathMs) },
    body: { model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: `${program} step` }], max_tokens: maxTokens, ignore_eos: true },
  });
  const res = await fetch(`${sim.pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  const stats = statsFromHeaders(res.headers);
  if (!stats) throw new Error("pool answered without stats headers");
  return stats;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

/**
 * B's agent: sequential calls of one program, its service accounted as the edge does.
 * `overtaken` reads how many flood calls have finished; per call, the agent records how
 * many finished while it was in flight: in FCFS order behind the flood that is about
 * as many as were queued (20+), with tenants served fairly only the few that held the
 * engine's slots. Counted in calls, not milliseconds, so a busy machine (the client,
 * the pool and the engine share one event loop here) does not change the verdict.
 */
async function steadyAgent(steps: number, overtaken: () => number = () => 0): Promise<{ queueMs: number; overtakenBy: number }> {
  let service = NO_SERVICE;
  let queueMs = 0;
  const passed: number[] = [];
  for (let i = 0; i < steps; i++) {
    const h = callStartValue(service);
    const before = overtaken();
    const stats = await call("ten_steady", "prog_steadyagent01", service, 16);
    passed.push(overtaken() - before);
    service = completeCall(service, h, stats.serviceMs);
    queueMs += stats.queueMs;
  }
  return { queueMs, overtakenBy: median(passed) };
}

describe("tenant fairness under a flood of new programs", () => {
  it("lets the steady tenant's calls pass the queued flood: a few flood calls finish while one of its calls is in flight, not the queue", async () => {
    await steadyAgent(2); // warm up connections

    let flooding = true;
    let floodCalls = 0;
    let floodQueueMs = 0;
    const flood = async (worker: number) => {
      for (let i = 0; flooding; i++) {
        const stats = await call("ten_flooder", `prog_flood${worker}x${i}`, NO_SERVICE, 16);
        floodCalls++;
        floodQueueMs += stats.queueMs;
      }
    };
    // Flood calls are as short as B's, so what B cannot avoid (a busy engine slot, no
    // preemption) stays small; behind the flood in FCFS order B would wait ~20 calls.
    const workers = Array.from({ length: 32 }, (_, w) => flood(w));
    while (sim.pool.dispatcher.queuedCount < 20) await new Promise((resolve) => setTimeout(resolve, 5));
    const queuedAtStart = sim.pool.dispatcher.queuedCount;
    const loaded = await steadyAgent(9, () => floodCalls);
    flooding = false;
    await Promise.all(workers);

    // The flood really queued: its calls waited far longer than the steady agent's.
    expect(floodCalls).toBeGreaterThan(20);
    expect(floodQueueMs / floodCalls).toBeGreaterThan(4 * (loaded.queueMs / 9));
    // Two engine slots: the calls holding them when B arrives, and about one more, finish before B's is done.
    expect(queuedAtStart).toBeGreaterThanOrEqual(20);
    expect(loaded.overtakenBy).toBeLessThanOrEqual(4);
  }, 60_000);
});
