import { afterEach, describe, expect, it, vi } from "vitest";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { EngineExchange } from "../../src/pool/engine-exchange.js";
import { DirectAnswer } from "../../src/pool/direct-answer.js";
import { type FakeBehavior, type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { chatBody, metricValue, type SignedCall, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * A whole answer's attempt ends after the answer has left (relay.ts endAfterAnswer): its
 * slot, metrics, TAO's signals and the next queued call's start follow the write. Every
 * way an answer leaves must still end the attempt exactly once: written straight to the
 * socket, handed to Hono under app.request(), translated (Messages via chat), with a call
 * waiting for the slot behind it; an engine's refusal (4xx), which ends at once, too.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(behave?: (index: number) => FakeBehavior, extra: Partial<PoolConfigInput> = {}): Promise<{ engine: FakeEngine; pool: PoolHandle }> {
  const engine = await startFakeEngine(behave ? { behave: (call) => behave(call.index) } : {});
  cleanups.push(() => engine.close());
  const pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url, maxInFlight: 1 }], ...extra }));
  cleanups.push(() => pool.close());
  return { engine, pool };
}

const overSocket = (pool: PoolHandle, call: SignedCall, path: string = POOL_PATHS.chatCompletions) =>
  fetch(`${pool.url}${path}`, { method: "POST", headers: call.headers, body: call.body });
const throughHono = (pool: PoolHandle, call: SignedCall, path: string = POOL_PATHS.chatCompletions) =>
  pool.app.request(path, { method: "POST", headers: call.headers, body: call.body });

const inFlight = (pool: PoolHandle) => pool.dispatcher.engineSnapshots().find((e) => e.id === "e1")?.inFlight;
/** Two calls over sockets: the first held at the engine, the second queued behind it; the first released, both answered. */
async function answerWithOneQueuedBehind(engine: FakeEngine, pool: PoolHandle): Promise<void> {
  const first = overSocket(pool, await signedCall());
  await engine.call(0);
  const second = overSocket(pool, await signedCall());
  await waitFor(() => pool.dispatcher.queuedCount === 1, "the second call queued behind the first");
  engine.calls[0]?.release();
  expect((await first).status).toBe(200);
  expect((await second).status).toBe(200);
}

async function ended(pool: PoolHandle, outcome: string): Promise<number> {
  return metricValue(await pool.metrics.registry.metrics(), `agentix_pool_calls_total{engine="e1",outcome="${outcome}"}`) ?? 0;
}
async function serviceObservations(pool: PoolHandle): Promise<number> {
  return metricValue(await pool.metrics.registry.metrics(), 'agentix_pool_service_seconds_count{engine="e1"}') ?? 0;
}

describe("a whole answer's attempt ends after the answer has left, exactly once", () => {
  it.each([
    ["written straight to the socket", overSocket],
    ["handed to Hono (app.request())", throughHono],
  ])("%s: the slot is free and the attempt counted once by the time the client has the answer", async (_how, send) => {
    const { pool } = await setup();
    for (let i = 1; i <= 3; i++) {
      const res = await send(pool, await signedCall());
      expect(res.status).toBe(200);
      // Nothing awaited between the answer and these reads: the end came with the answer.
      expect(inFlight(pool)).toBe(0);
      expect(pool.dispatcher.runningCount).toBe(0);
      await res.arrayBuffer();
      expect(await ended(pool, "completed")).toBe(i);
      expect(await serviceObservations(pool)).toBe(i);
    }
  });

  it("starts the call queued behind an answer once it has been written", async () => {
    const { engine, pool } = await setup((index) => (index === 0 ? { kind: "json", hold: true } : { kind: "json" }));
    await answerWithOneQueuedBehind(engine, pool);
    expect(engine.calls).toHaveLength(2);
    expect(await ended(pool, "completed")).toBe(2);
    expect(inFlight(pool)).toBe(0);
  });

  it("is written from within the engine's end, and what follows it (the queued call's dispatch) after undici's callback", async () => {
    const { engine, pool } = await setup((index) => (index === 0 ? { kind: "json", hold: true } : { kind: "json" }));
    let insideEngineEnd = false;
    const onResponseEnd = EngineExchange.prototype.onResponseEnd;
    const ends = vi.spyOn(EngineExchange.prototype, "onResponseEnd").mockImplementation(function (this: EngineExchange) {
      insideEngineEnd = true;
      try {
        onResponseEnd.call(this);
      } finally {
        insideEngineEnd = false;
      }
    });
    const writes: boolean[] = [];
    const write = DirectAnswer.prototype.write;
    const written = vi.spyOn(DirectAnswer.prototype, "write").mockImplementation(function (this: DirectAnswer, ...args: Parameters<DirectAnswer["write"]>) {
      writes.push(insideEngineEnd);
      write.apply(this, args);
    });
    const dispatches: boolean[] = [];
    const send = EngineExchange.send.bind(EngineExchange);
    const sent = vi.spyOn(EngineExchange, "send").mockImplementation((...args: Parameters<typeof EngineExchange.send>) => {
      dispatches.push(insideEngineEnd);
      return send(...args);
    });
    try {
      await answerWithOneQueuedBehind(engine, pool);
    } finally {
      ends.mockRestore();
      written.mockRestore();
      sent.mockRestore();
    }
    // Both answers written inside the engine's end; the second call sent to the engine outside any.
    expect(writes).toEqual([true, true]);
    expect(dispatches).toEqual([false, false]);
    expect(await ended(pool, "completed")).toBe(2);
    expect(inFlight(pool)).toBe(0);
  });

  it("ends a translated answer's attempt (Messages via chat) once, though nobody writes the engine's answer straight", async () => {
    const { pool } = await setup();
    const call = await signedCall({ path: POOL_PATHS.messages, body: { model: "test-model", max_tokens: 5, messages: [{ role: "user", content: "hi" }] } });
    const res = await overSocket(pool, call, POOL_PATHS.messages);
    expect(res.status).toBe(200);
    expect((await res.json()) as { type: string }).toMatchObject({ type: "message" });
    await waitFor(() => inFlight(pool) === 0 && pool.dispatcher.runningCount === 0, "the attempt's end");
    expect(await ended(pool, "completed")).toBe(1);
    expect(await serviceObservations(pool)).toBe(1);
  });

  it("ends an engine's refusal (4xx) once, as client_error", async () => {
    const { pool } = await setup(() => ({ kind: "status", status: 400 }));
    for (const send of [overSocket, throughHono]) {
      expect((await send(pool, await signedCall())).status).toBe(400);
      expect(inFlight(pool)).toBe(0);
    }
    expect(await ended(pool, "client_error")).toBe(2);
    expect(await serviceObservations(pool)).toBe(2);
  });

  it("ends a stream's attempt at its end, not when it starts", async () => {
    const { engine, pool } = await setup(() => ({ kind: "stream" }));
    const res = await overSocket(pool, await signedCall({ body: chatBody({ stream: true }) }));
    expect(res.status).toBe(200);
    expect(pool.dispatcher.runningCount).toBe(1);
    expect(inFlight(pool)).toBe(1);
    engine.calls[0]?.release();
    await res.text();
    await waitFor(() => inFlight(pool) === 0, "the stream's end");
    expect(await ended(pool, "completed")).toBe(1);
  });
});
