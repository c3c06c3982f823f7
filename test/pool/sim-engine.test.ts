import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChatCompletion } from "../../src/protocol/chat.js";
import { Header } from "../../src/protocol/headers.js";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { chatBody, operatorGet, type SignedCall, signedCall, testConfig, waitFor } from "./helpers.js";

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
  it("reads an engine's load from its vLLM metrics, and its health, as they change", async () => {
    // An engine of its own, in real time and one sequence at a time, so requests wait inside it.
    const busy = await startSimEngine({ timeScale: 1, maxNumSeqs: 1 });
    const watcher = await startPool(testConfig({ engines: [{ id: "busy", url: busy.url }], metricsIntervalMs: 20, unhealthyAfterFailures: 1 }));
    const reading = () => watcher.dispatcher.engineSnapshots()[0];
    const client = new AbortController();
    try {
      expect(reading()).toMatchObject({ healthy: true, waiting: 0, kvUsage: 0 });
      // Three long generations sent straight to the engine: one runs, two wait. Only its /metrics tells the pool.
      const direct = [0, 1, 2].map(() =>
        fetch(`${busy.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body({ max_tokens: 5_000, ignore_eos: true, stream: true })),
          signal: client.signal,
        }).catch(() => undefined),
      );
      await waitFor(() => reading()?.waiting === 2 && (reading()?.kvUsage ?? 0) > 0, "two requests waiting and KV in use, read from /metrics");

      client.abort();
      await Promise.all(direct);
      await waitFor(() => reading()?.waiting === 0 && reading()?.kvUsage === 0, "the engine drained");

      await busy.close();
      await waitFor(() => reading()?.healthy === false, "the closed engine marked unhealthy");
    } finally {
      client.abort();
      await watcher.close();
      await busy.close();
    }
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
