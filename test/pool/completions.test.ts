import { serve, type ServerType } from "@hono/node-server";
import { Hono } from "hono";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TextCompletion } from "../../src/protocol/completions.js";
import { Header } from "../../src/protocol/headers.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { signedCall, testConfig } from "./helpers.js";

/*
 * Issue 12: the legacy completions API through the pool. It shares the chat queue
 * (one program priority, one admission) and goes to the engine's own /v1/completions,
 * which vLLM, SGLang and the simulated engine serve natively.
 */

let engine: SimEngineHandle;
let recorder: ServerType;
let pool: PoolHandle;
const seenPaths: string[] = [];
const seenBodies: Record<string, unknown>[] = [];

beforeAll(async () => {
  engine = await startSimEngine({ timeScale: 1_000 });
  // What the engine receives, recorded on the way: a pass-through in front of the simulated engine.
  const app = new Hono();
  app.all("*", async (c) => {
    const url = new URL(c.req.url);
    const body = c.req.method === "POST" ? await c.req.text() : undefined;
    if (body !== undefined) {
      seenPaths.push(url.pathname);
      seenBodies.push(JSON.parse(body) as Record<string, unknown>);
    }
    return fetch(`${engine.url}${url.pathname}`, { method: c.req.method, headers: c.req.raw.headers, ...(body === undefined ? {} : { body }) });
  });
  const port = await new Promise<number>((resolve) => {
    recorder = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => resolve(info.port));
  });
  pool = await startPool(testConfig({ engines: [{ id: "sim-c", url: `http://127.0.0.1:${port}` }], models: [DEFAULT_SIM_MODEL] }));
});
afterAll(async () => {
  await pool?.close();
  recorder?.close();
  await engine?.close();
});

async function complete(body: Record<string, unknown>): Promise<Response> {
  const call = await signedCall({ path: POOL_PATHS.completions, body: { model: DEFAULT_SIM_MODEL, prompt: "def fib(n):", max_tokens: 6, ...body } });
  return fetch(`${pool.url}${POOL_PATHS.completions}`, { method: "POST", headers: call.headers, body: call.body });
}

describe("POST /v1/completions at the pool", () => {
  it("sends a completion to the engine's /v1/completions with the pool's priority, and relays its answer with stats", async () => {
    const res = await complete({});
    expect(res.status).toBe(200);
    const body = TextCompletion.parse(await res.json());
    expect(body.choices[0]?.text?.length).toBeGreaterThan(0);
    expect((body as { usage?: unknown }).usage).toMatchObject({ completion_tokens: 6 });
    expect(statsFromHeaders(res.headers)).toMatchObject({ engine: "sim-c" });
    expect(res.headers.get(Header.poolLoad)).not.toBeNull();
    expect(seenPaths.at(-1)).toBe("/v1/completions");
    expect(seenBodies.at(-1)).toMatchObject({ prompt: "def fib(n):", max_tokens: 6, priority: expect.any(Number) });
  });

  it("streams a completion: chunks, the usage chunk the pool asked for, its stats comment, [DONE]", async () => {
    const res = await complete({ stream: true });
    expect(res.status).toBe(200);
    const events: string[] = [];
    const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      events.push(next.value);
    }
    const chunks = events.filter((e) => !isDoneEvent(e) && eventData(e) !== undefined).map((e) => JSON.parse(eventData(e)!) as Record<string, unknown>);
    expect(chunks.every((c) => c.object === "text_completion")).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 6 } });
    expect(events.some((e) => parseStatsEvent(e)?.engine === "sim-c")).toBe(true);
    expect(isDoneEvent(events.at(-1)!)).toBe(true);
    expect(seenBodies.at(-1)).toMatchObject({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } });
  });

  it("refuses a completions signature on the chat route and a chat body on the completions route", async () => {
    const call = await signedCall({ path: POOL_PATHS.completions, body: { model: DEFAULT_SIM_MODEL, prompt: "x" } });
    const crossed = await fetch(`${pool.url}${POOL_PATHS.chatCompletions}`, { method: "POST", headers: call.headers, body: call.body });
    expect(crossed.status).toBe(401);
    const chatShaped = await signedCall({ path: POOL_PATHS.completions, body: { model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: "x" }] } });
    const refused = await fetch(`${pool.url}${POOL_PATHS.completions}`, { method: "POST", headers: chatShaped.headers, body: chatShaped.body });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { param: string } }).error.param).toBe("prompt");
  });
});
