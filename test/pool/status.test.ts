import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readPoolStatus } from "../../src/edge/chat/pool-client.js";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { parsePoolLoad, PoolStatus } from "../../src/protocol/pool-status.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { SIGNING_KEY, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * GET /v1/status: what the edge reads to choose between pools. The edge's own client
 * (src/edge/chat/pool-client.ts, plain fetch and WebCrypto) against a real pool on a
 * socket, with a simulated engine slow enough that calls are still running when read.
 */

let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ engineId: "sim-1", timeScale: 10 });
  pool = await startPool(
    testConfig({ engines: [{ id: "sim-1", url: engine.url, maxInFlight: 1, kvCapacityTokens: 100_000 }], models: [DEFAULT_SIM_MODEL] }),
  );
});
afterAll(async () => {
  await pool.close();
  await engine.close();
});

/**
 * ~1.5 s of real time a call (2,048 tokens at timeScale 10), so the status read after "one running,
 * two queued" still sees that on a loaded machine (at 256 tokens, ~0.2 s, the first call once ended in between).
 */
const CALL_TOKENS = 2_048;

const target = () => ({ poolUrl: pool.url, signingKey: SIGNING_KEY });

async function sendCall(program: string): Promise<Response> {
  const signed = await signedCall({
    fields: { program },
    body: { model: DEFAULT_SIM_MODEL, messages: [{ role: "user", content: `${program} step` }], max_tokens: CALL_TOKENS, ignore_eos: true },
  });
  return fetch(`${pool.url}${POOL_PATHS.chatCompletions}`, { method: "POST", headers: signed.headers, body: signed.body });
}

describe("the pool's signed status", () => {
  it("says the pool is healthy, what it serves and that it is idle", async () => {
    await waitFor(() => pool.dispatcher.hasHealthyEngine(), "the engine to be healthy");
    const status = await readPoolStatus(target(), Date.now());
    expect(status).toMatchObject({
      object: "pool.status",
      status: "ok",
      models: [DEFAULT_SIM_MODEL],
      engines: { total: 1, healthy: 1 },
      queue: { queued: 0, running: 0 },
      kv: { capacity_tokens: 100_000, free_tokens: 100_000 },
    });
    expect(status.queue.by_level.every((n) => n === 0)).toBe(true);
  });

  it("counts running and queued calls and the KV they hold while they run", async () => {
    // One call at a time on the engine: the second and third wait in the pool's queue.
    const calls = ["prog_statusfirst", "prog_statussecond", "prog_statusthird"].map(sendCall);
    await waitFor(() => pool.dispatcher.runningCount === 1 && pool.dispatcher.queuedCount === 2, "one call running, two queued");
    const busy = await readPoolStatus(target(), Date.now());
    expect(busy.queue.running).toBe(1);
    expect(busy.queue.queued).toBe(2);
    expect(busy.queue.by_level.reduce((a, b) => a + b, 0)).toBe(2);
    expect(busy.kv.free_tokens).toBeLessThan(busy.kv.capacity_tokens);
    // Every answer states the pool's load when it was given (queued + running per healthy engine):
    // the one answered first came with calls still waiting behind it. (Which of the three reached the
    // pool first is the sockets' race, not the order they were sent: a CI run answered "first" last, load 0.)
    const loads: (number | undefined)[] = [];
    for (const res of await Promise.all(calls)) {
      expect(res.status).toBe(200);
      loads.push(parsePoolLoad(res.headers.get(Header.poolLoad)));
      await res.arrayBuffer();
    }
    expect(loads.every((load) => load !== undefined)).toBe(true);
    expect(Math.max(...(loads as number[]))).toBeGreaterThanOrEqual(1);
    expect(Math.min(...(loads as number[]))).toBeLessThan(Math.max(...(loads as number[])));
    await waitFor(() => pool.dispatcher.runningCount === 0, "the calls to finish");
    // The KV a finished call held is given back after its slot (a failed CI run read it in between).
    await waitFor(async () => {
      const idle = await readPoolStatus(target(), Date.now());
      return idle.kv.free_tokens === idle.kv.capacity_tokens;
    }, "the finished calls' KV to be free again");
  });

  it("answers only the edge: unsigned, wrongly keyed or another route's signature is 401", async () => {
    const unsigned = await fetch(`${pool.url}${POOL_PATHS.status}`);
    expect(unsigned.status).toBe(401);
    expect(OpenAIErrorBody.parse(await unsigned.json()).error.code).toBe("missing_signature");

    await expect(readPoolStatus({ poolUrl: pool.url, signingKey: { id: "not-held", secret: "some-other-secret-entirely" } }, Date.now())).rejects.toThrow(
      /401/,
    );

    // A call's (POST) signature over an empty body, presented on the status route.
    const call = await signedCall({ body: "" });
    const swapped = await fetch(`${pool.url}${POOL_PATHS.status}`, { headers: call.headers });
    expect(swapped.status).toBe(401);
    expect(OpenAIErrorBody.parse(await swapped.json()).error.code).toBe("invalid_signature");
  });

  it("says degraded, with 0 healthy engines, when its engine is gone", async () => {
    const lonely = await startPool(testConfig({ engines: [{ id: "gone", url: "http://127.0.0.1:9", maxInFlight: 1 }] }));
    try {
      await waitFor(() => !lonely.dispatcher.hasHealthyEngine(), "the engine to be marked unhealthy");
      const status = PoolStatus.parse(await readPoolStatus({ poolUrl: lonely.url, signingKey: SIGNING_KEY }, Date.now()));
      expect(status).toMatchObject({ status: "degraded", models: null, engines: { total: 1, healthy: 0 }, kv: { capacity_tokens: 0, free_tokens: 0 } });
    } finally {
      await lonely.close();
    }
  });
});
