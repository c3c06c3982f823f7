import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagesResponse, MessagesStreamEvent } from "../../src/protocol/messages.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { eventData, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { signedCall, testConfig } from "./helpers.js";

/*
 * Issue 12: Anthropic's Messages API at the pool. The engine gets a chat completion
 * (the same queue, admission and usage reading as chat calls); the answer goes back in
 * Anthropic's shape, JSON or stream, with the pool's stats.
 */

let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ timeScale: 1_000 });
  pool = await startPool(testConfig({ engines: [{ id: "sim-m", url: engine.url }], models: [DEFAULT_SIM_MODEL] }));
});
afterAll(async () => {
  await pool?.close();
  await engine?.close();
});

async function message(body: Record<string, unknown>): Promise<Response> {
  const call = await signedCall({
    path: POOL_PATHS.messages,
    body: { model: DEFAULT_SIM_MODEL, max_tokens: 7, system: "You are terse.", messages: [{ role: "user", content: "List the files." }], ...body },
  });
  return fetch(`${pool.url}${POOL_PATHS.messages}`, { method: "POST", headers: call.headers, body: call.body });
}

async function events(res: Response): Promise<string[]> {
  const out: string[] = [];
  const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return out;
    out.push(next.value);
  }
}

describe("POST /v1/messages at the pool", () => {
  it("answers a message in Anthropic's shape with the engine's usage and the pool's stats", async () => {
    const res = await message({});
    expect(res.status).toBe(200);
    const body = MessagesResponse.parse(await res.json());
    expect(body).toMatchObject({ type: "message", role: "assistant", model: DEFAULT_SIM_MODEL, stop_reason: "max_tokens" });
    expect(body.id).toMatch(/^msg_/);
    expect(body.content[0]).toMatchObject({ type: "text" });
    expect(body.usage.output_tokens).toBe(7);
    expect(body.usage.input_tokens).toBeGreaterThan(0);
    expect(statsFromHeaders(res.headers)).toMatchObject({ engine: "sim-m" });
  });

  it("streams Anthropic's events in order, the usage in message_delta, and the pool's stats comment", async () => {
    const res = await message({ stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const raw = await events(res);
    const typed = raw.filter((e) => eventData(e) !== undefined).map((e) => MessagesStreamEvent.parse(JSON.parse(eventData(e)!)));
    const types = typed.map((e) => e.type);
    expect(types[0]).toBe("message_start");
    expect(types.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
    expect(types.filter((t) => t === "content_block_delta").length).toBeGreaterThan(0);
    const delta = typed.find((e) => e.type === "message_delta");
    expect(delta).toMatchObject({ delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 7 } });
    // Each event names its type on its own line, as Anthropic's clients read it.
    expect(raw.filter((e) => eventData(e) !== undefined).every((e) => /^event: [a-z_]+\n/.test(e))).toBe(true);
    expect(raw.some((e) => parseStatsEvent(e)?.engine === "sim-m")).toBe(true);
    expect(raw.some((e) => e.includes("[DONE]"))).toBe(false);
  });

  it("refuses a chat body on the messages route with 400, before queueing", async () => {
    const call = await signedCall({ path: POOL_PATHS.messages, body: { model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: "x" }] } });
    const res = await fetch(`${pool.url}${POOL_PATHS.messages}`, { method: "POST", headers: call.headers, body: call.body });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe("max_tokens");
  });
});
