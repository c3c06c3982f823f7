import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
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
let tap: Server;
/** When each call reached the engine (by the name its message starts with): the pool's dispatch as the engine sees it. */
const reachedEngine = new Map<string, number>();

/**
 * Between the pool and the engine: notes when each completion request arrives, then
 * forwards it unchanged. The order of dispatches is read here, not from the client's
 * clock (which would add each call's own, load-dependent trip to the pool).
 */
async function startTap(engineUrl: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      if (req.method === "POST" && body.length > 0) {
        const parsed = JSON.parse(body.toString("utf8")) as { messages?: Array<{ content?: string }> };
        const name = parsed.messages?.[0]?.content?.split(" ")[0];
        if (name !== undefined) reachedEngine.set(name, performance.now());
      }
      const headers = { "content-type": req.headers["content-type"] ?? "application/json" };
      fetch(`${engineUrl}${req.url ?? "/"}`, { method: req.method ?? "GET", headers, ...(req.method === "POST" ? { body } : {}) })
        .then(async (upstream) => {
          const answer = Buffer.from(await upstream.arrayBuffer());
          res.writeHead(upstream.status, { "content-type": upstream.headers.get("content-type") ?? "application/json" });
          res.end(answer);
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  engine = await startSimEngine({ engineId: "sim-1", timeScale: 10 });
  const tapped = await startTap(engine.url);
  tap = tapped.server;
  pool = await startPool(
    testConfig({ engines: [{ id: "sim-1", url: tapped.url, maxInFlight: 64, kvCapacityTokens: KV_CAPACITY, profile: "llama-3.1-8b-h100" }] }),
  );
});
afterAll(async () => {
  await pool?.close();
  await new Promise((resolve) => tap?.close(resolve));
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
  /** When the pool took the call (its dispatch less the queue time it reports), and when it reached the engine. */
  arrivedAt: number;
  dispatchedAt: number;
  queueMs: number;
}

async function send(name: string, program: string, serviceMs: number, promptTokens: number, maxTokens: number): Promise<Sent> {
  const signed = await signedCall({
    fields: { program, serviceMs, pathMs: serviceMs },
    body: { model: DEFAULT_SIM_MODEL, messages: [messageOf(promptTokens, name)], max_tokens: maxTokens, ignore_eos: true },
  });
  const res = await fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: signed.headers, body: signed.body });
  await res.arrayBuffer();
  expect(res.status).toBe(200);
  const stats = statsFromHeaders(res.headers);
  if (!stats) throw new Error("pool answered without stats headers");
  const dispatchedAt = reachedEngine.get(name);
  if (dispatchedAt === undefined) throw new Error(`${name} never reached the engine`);
  return { name, arrivedAt: dispatchedAt - stats.queueMs, dispatchedAt, queueMs: stats.queueMs };
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
    const freshArrived = Math.max(...freshCalls.map((c) => c.arrivedAt));
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
