import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatCompletion } from "../../src/protocol/chat.js";
import { Header } from "../../src/protocol/headers.js";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, operatorGet, type SignedCall, signedCall, testConfig } from "./helpers.js";

// The pool in front of the project's simulated vLLM engines (fast-forwarded time).
let engines: SimEngineHandle[];
let pool: PoolHandle;

beforeAll(async () => {
  engines = await Promise.all([startSimEngine({ timeScale: 1_000 }), startSimEngine({ timeScale: 1_000 })]);
  pool = await startPool(testConfig({ engines: engines.map((e, i) => ({ id: `sim${i}`, url: e.url })) }));
});
afterAll(async () => {
  await pool?.close();
  await Promise.all((engines ?? []).map((e) => e.close()));
});

const send = (call: SignedCall) =>
  fetch(`${pool.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });
const body = (extra: Record<string, unknown> = {}) => chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 8, ...extra });

describe("pool with simulated vLLM engines", () => {
  it("reads the engines' metrics and health", () => {
    expect(pool.dispatcher.engineSnapshots().every((e) => e.healthy)).toBe(true);
  });

  it("relays a non-streaming completion with usage and stats headers", async () => {
    const res = await send(await signedCall({ body: body() }));
    expect(res.status).toBe(200);
    const completion = ChatCompletion.parse(await res.json());
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);
    expect(statsFromHeaders(res.headers)?.engine).toMatch(/^sim[01]$/);
  });

  it("relays a stream with usage, stats and [DONE]", async () => {
    const res = await send(await signedCall({ body: body({ stream: true }) }));
    expect(res.status).toBe(200);
    const events: string[] = [];
    const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) events.push(next.value);
    expect(isDoneEvent(events.at(-1) ?? "")).toBe(true);
    expect(parseStatsEvent(events.at(-2) ?? "")?.engine).toMatch(/^sim[01]$/);
    const usageChunk = events.map((e) => eventData(e)).find((d) => d?.includes('"usage":{'));
    expect(usageChunk).toBeDefined();
  });

  it("retries on the other engine when one answers 500", async () => {
    // Idle engines tie on load and the lowest id wins, so sim0 is tried first.
    engines[0]?.failNext(1, "http-500");
    const res = await send(await signedCall({ body: body() }));
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.engine)).toBe("sim1");
    expect(await (await operatorGet(pool.url, "/metrics")).text()).toContain('agentix_pool_retries_total{engine="sim0"} 1');
  });
});
