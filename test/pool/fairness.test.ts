import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callStartValue, completeCall, NO_SERVICE, type ProgramService } from "../../src/core/service.js";
import { statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { signedCall, testConfig } from "./helpers.js";

/*
 * Tenant fairness with the pool and a simulated engine in the loop: tenant A opens
 * a new program on every call (so each of its calls has no program history and sits
 * in the top level), while tenant B runs one steady agent. Inside a level the pool
 * serves tenants by decayed service / weight, so B is not stuck behind A's flood.
 */

let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ engineId: "sim-1", timeScale: 10 });
  pool = await startPool(testConfig({ engines: [{ id: "sim-1", url: engine.url, maxInFlight: 2 }] }));
});

afterAll(async () => {
  await pool?.close();
  await engine?.close();
});

async function call(tenant: string, program: string, service: ProgramService, maxTokens: number) {
  const signed = await signedCall({
    fields: { tenant, program, serviceMs: Math.round(service.attainedServiceMs), pathMs: Math.round(service.criticalPathMs) },
    body: { model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: `${program} step` }], max_tokens: maxTokens, ignore_eos: true },
  });
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  const stats = statsFromHeaders(res.headers);
  if (!stats) throw new Error("pool answered without stats headers");
  return stats;
}

/** B's agent: sequential calls of one program, its service accounted as the edge does. */
async function steadyAgent(steps: number): Promise<{ wallMs: number; queueMs: number }> {
  let service = NO_SERVICE;
  let queueMs = 0;
  const started = performance.now();
  for (let i = 0; i < steps; i++) {
    const h = callStartValue(service);
    const stats = await call("ten_steady", "prog_steadyagent01", service, 16);
    service = completeCall(service, h, stats.serviceMs);
    queueMs += stats.queueMs;
  }
  return { wallMs: performance.now() - started, queueMs };
}

describe("tenant fairness under a flood of new programs", () => {
  it("keeps the steady tenant's program latency within 3x of unloaded", async () => {
    await steadyAgent(2); // warm up connections
    const unloaded = await steadyAgent(8);

    let flooding = true;
    let floodCalls = 0;
    let floodQueueMs = 0;
    const flood = async (worker: number) => {
      for (let i = 0; flooding; i++) {
        const stats = await call("ten_flooder", `prog_flood${worker}x${i}`, NO_SERVICE, 64);
        floodCalls++;
        floodQueueMs += stats.queueMs;
      }
    };
    const workers = Array.from({ length: 32 }, (_, w) => flood(w));
    while (pool.dispatcher.queuedCount < 20) await new Promise((resolve) => setTimeout(resolve, 5));
    const loaded = await steadyAgent(8);
    flooding = false;
    await Promise.all(workers);

    // The flood really queued: its calls waited far longer than the steady agent's.
    expect(floodCalls).toBeGreaterThan(20);
    expect(floodQueueMs / floodCalls).toBeGreaterThan(4 * (loaded.queueMs / 8));
    expect(loaded.wallMs).toBeLessThan(3 * unloaded.wallMs);
  }, 60_000);
});
