import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { estimatePromptTokens } from "../../src/protocol/tokens.js";
import { statsFromHeaders } from "../../src/protocol/stats.js";
import type { PoolHandle } from "../../src/pool/server.js";
import { startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { metricValue, operatorGet, signedCall, testConfig } from "./helpers.js";

/*
 * Admission on a live pool with a simulated engine: the engine is declared to hold
 * 4,000 tokens of KV, so one long-context call leaves room for one short call at a
 * time and the pool's queue holds the rest. The count cap (64) never binds. Held calls
 * must enter in program-priority order: calls of fresh programs (level 0) sent after
 * calls of a program with a minute of service (a deep level) still go first.
 */

const KV_CAPACITY = 4_000;
let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ engineId: "sim-1", timeScale: 10 });
  pool = await startPool(
    testConfig({ engines: [{ id: "sim-1", url: engine.url, maxInFlight: 64, kvCapacityTokens: KV_CAPACITY, profile: "llama-3.1-8b-h100" }] }),
  );
});
afterAll(async () => {
  await pool?.close();
  await engine?.close();
});

/** A message of about `tokens` prompt tokens, as the pool estimates them. */
function messageOf(tokens: number, tag: string): { role: "user"; content: string } {
  let content = tag;
  while (estimatePromptTokens({ messages: [{ role: "user", content }] }) < tokens) content += " lorem ipsum dolor sit amet";
  return { role: "user", content };
}

interface Sent {
  name: string;
  sentAt: number;
  dispatchedAt: number;
  queueMs: number;
}

async function send(name: string, program: string, serviceMs: number, promptTokens: number, maxTokens: number): Promise<Sent> {
  const signed = await signedCall({
    fields: { program, serviceMs, pathMs: serviceMs },
    body: { model: DEFAULT_SIM_MODEL, messages: [messageOf(promptTokens, name)], max_tokens: maxTokens, ignore_eos: true },
  });
  const sentAt = performance.now();
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  const stats = statsFromHeaders(res.headers);
  if (!stats) throw new Error("pool answered without stats headers");
  return { name, sentAt, dispatchedAt: sentAt + stats.queueMs, queueMs: stats.queueMs };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("admission by KV on a live pool", () => {
  it("holds calls the engine has no KV room for, and lets them in by program priority", async () => {
    // ~2,500 tokens of context decoding 1,000 tokens (~0.7 s real at time scale 10).
    const blocker = send("blocker", "prog_blocker", 0, 2_500, 1_000);
    await pause(50);
    // Long programs' calls (a minute of service each: a deep level), sent first ...
    const deep = Array.from({ length: 4 }, (_, i) => send(`deep${i}`, `prog_deep${i}`, 60_000, 600, 200));
    await pause(50);
    // ... then fresh programs' calls (level 0).
    const fresh = Array.from({ length: 4 }, (_, i) => send(`fresh${i}`, `prog_fresh${i}`, 0, 600, 200));
    const [, deepCalls, freshCalls] = await Promise.all([blocker, Promise.all(deep), Promise.all(fresh)]);

    // The queue held calls: each fresh call waited for room.
    for (const call of freshCalls) expect(call.queueMs).toBeGreaterThan(20);
    // Every deep call still queued when the fresh ones arrived entered after all of them.
    const freshArrived = Math.max(...freshCalls.map((c) => c.sentAt));
    const heldDeep = deepCalls.filter((c) => c.dispatchedAt > freshArrived + 5);
    expect(heldDeep.length).toBeGreaterThanOrEqual(2);
    const lastFresh = Math.max(...freshCalls.map((c) => c.dispatchedAt));
    for (const call of heldDeep) expect(call.dispatchedAt).toBeGreaterThan(lastFresh);

    const metrics = await (await operatorGet(pool.url, "/metrics")).text();
    expect(metricValue(metrics, 'agentix_pool_calls_held_total{reason="kv"}')).toBeGreaterThanOrEqual(6);
    expect(metricValue(metrics, 'agentix_pool_admission_holds_total{reason="kv"}')).toBeGreaterThan(0);
    // Idle again: nothing projected on the engine.
    expect(metricValue(metrics, 'agentix_pool_engine_projected_kv_tokens{engine="sim-1"}')).toBe(0);
  }, 20_000);
});
