import { afterEach, describe, expect, it } from "vitest";
import { standaloneCallMs } from "../../src/core/admission.js";
import { levelOf } from "../../src/core/levels.js";
import { DEFAULT_QUEUE_SETTINGS } from "../../src/core/settings.js";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { eventData, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { decodeCostOf, resolveProfile } from "../../src/sim/profiles.js";
import { type FakeBehavior, type FakeEngine, refusedUrl, startFakeEngine } from "./fake-engine.js";
import { chatBody, operatorGet, type SignedCall, signedCall, testConfig, waitFor } from "./helpers.js";

type EngineInput = PoolConfigInput["engines"][number];

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function fakeEngine(behave?: (index: number) => FakeBehavior, metrics?: string): Promise<FakeEngine> {
  const engine = await startFakeEngine({ behave: behave && ((call) => behave(call.index)), metrics });
  cleanups.push(() => engine.close());
  return engine;
}

async function pool(engines: EngineInput[], extra: Partial<PoolConfigInput> = {}): Promise<PoolHandle> {
  const handle = await startPool(testConfig({ engines, ...extra }));
  cleanups.push(() => handle.close());
  return handle;
}

const send = (p: PoolHandle, call: SignedCall, signal?: AbortSignal) =>
  fetch(`${p.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body, signal });

const held: FakeBehavior = { kind: "json", hold: true };
const callIdAt = (engine: FakeEngine, index: number) => engine.calls[index]?.headers.get("x-request-id");
const inFlightOn = (p: PoolHandle, id: string) => p.dispatcher.engineSnapshots().find((e) => e.id === id)?.inFlight;

describe("pool scheduling", () => {
  it("dispatches a queued call of a program with little service before an earlier one with much more", async () => {
    const engine = await fakeEngine(() => held);
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }]);

    const first = await signedCall({ fields: { program: "prog_first" } });
    const heavy = await signedCall({ fields: { program: "prog_heavy", serviceMs: 100_000, pathMs: 100_000 } });
    const light = await signedCall({ fields: { program: "prog_light", serviceMs: 300, pathMs: 300 } });

    const firstRes = send(p, first);
    await engine.call(0);
    const heavyRes = send(p, heavy);
    await waitFor(() => p.dispatcher.queuedCount === 1, "heavy call queued");
    const lightRes = send(p, light);
    await waitFor(() => p.dispatcher.queuedCount === 2, "light call queued");
    expect(engine.calls).toHaveLength(1);

    engine.calls[0]?.release();
    expect((await firstRes).status).toBe(200);
    const second = await engine.call(1);
    expect(callIdAt(engine, 1)).toBe(light.fields.call);
    // vLLM adapter: priority = queue level, lower first.
    expect(second.body.priority).toBe(levelOf(300, DEFAULT_QUEUE_SETTINGS));
    expect(engine.calls).toHaveLength(2);

    second.release();
    expect((await lightRes).status).toBe(200);
    const third = await engine.call(2);
    expect(callIdAt(engine, 2)).toBe(heavy.fields.call);
    expect(third.body.priority).toBe(levelOf(100_000, DEFAULT_QUEUE_SETTINGS));
    third.release();
    expect((await heavyRes).status).toBe(200);
  });

  it("keeps calls queued while the only engine is saturated by its own metrics, and sends them when it drains", async () => {
    const busy = "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 9\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n";
    const engine = await fakeEngine(undefined, busy);
    const p = await pool([{ id: "e1", url: engine.url }]);
    expect(p.dispatcher.engineSnapshots()[0]).toMatchObject({ waiting: 9, kvUsage: 0.5, healthy: true });

    const res = send(p, await signedCall());
    await waitFor(() => p.dispatcher.queuedCount === 1, "call queued");
    await new Promise((resolve) => setTimeout(resolve, 120));
    expect(engine.calls).toHaveLength(0);

    engine.setMetrics("vllm:num_requests_waiting 0\n");
    expect((await res).status).toBe(200);
    expect(engine.calls).toHaveLength(1);
  });

  it("holds calls while the engine's metrics say it is backed up, and sends them once a quick re-read says it no longer is", async () => {
    const engine = await fakeEngine(undefined, "vllm:num_requests_waiting 9\n");
    // The normal period is a minute: only the saturated engine's short one can release the call in time.
    const p = await pool([{ id: "e1", url: engine.url }], { metricsIntervalMs: 60_000, saturatedMetricsIntervalMs: 20 });
    const res = send(p, await signedCall());
    await waitFor(() => p.dispatcher.queuedCount === 1, "call held in the queue");
    expect(engine.calls).toHaveLength(0);

    engine.setMetrics("vllm:num_requests_waiting 0\n");
    expect((await res).status).toBe(200);
    expect(engine.calls).toHaveLength(1);
  });
});

describe("client disconnect", () => {
  it("removes a queued call: it never reaches the engine", async () => {
    const engine = await fakeEngine(() => held);
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }]);
    const busy = send(p, await signedCall());
    await engine.call(0);

    const client = new AbortController();
    const gone = send(p, await signedCall(), client.signal).catch((error: unknown) => error);
    await waitFor(() => p.dispatcher.queuedCount === 1, "call queued");
    client.abort();
    await gone;
    await waitFor(() => p.dispatcher.queuedCount === 0, "queued call removed");

    const next = await signedCall();
    const nextRes = send(p, next);
    await waitFor(() => p.dispatcher.queuedCount === 1, "next call queued");
    engine.calls[0]?.release();
    expect((await busy).status).toBe(200);
    (await engine.call(1)).release();
    expect((await nextRes).status).toBe(200);
    expect(callIdAt(engine, 1)).toBe(next.fields.call);
    expect(engine.calls).toHaveLength(2);
    expect(await (await operatorGet(p.url, "/metrics")).text()).toMatch(/agentix_pool_cancelled_calls_total\{stage="queued"\} 1/);
  });

  it("aborts a running engine request and frees its slot", async () => {
    const engine = await fakeEngine(() => held);
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }]);
    const client = new AbortController();
    const gone = send(p, await signedCall(), client.signal).catch((error: unknown) => error);
    const running = await engine.call(0);
    expect(inFlightOn(p, "e1")).toBe(1);

    client.abort();
    await gone;
    await running.aborted;
    expect(running.isAborted()).toBe(true);
    await waitFor(() => inFlightOn(p, "e1") === 0, "slot freed");

    const next = send(p, await signedCall());
    (await engine.call(1)).release();
    expect((await next).status).toBe(200);
  });

  it("aborts a running stream when the client goes away mid-stream", async () => {
    const engine = await fakeEngine(() => ({ kind: "stream" }));
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }]);
    const client = new AbortController();
    const res = await send(p, await signedCall({ body: chatBody({ stream: true }) }), client.signal);
    const reader = res.body!.getReader();
    await reader.read();
    client.abort();
    await engine.calls[0]!.aborted;
    await waitFor(() => inFlightOn(p, "e1") === 0, "slot freed");
    expect(p.dispatcher.runningCount).toBe(0);
  });
});

describe("retry before the first byte", () => {
  it("moves a call to another engine when the first answers 503", async () => {
    const failing = await fakeEngine(() => ({ kind: "status", status: 503 }));
    const good = await fakeEngine();
    // Equal load ties go to the lowest id, so "a-failing" is tried first.
    const p = await pool([
      { id: "a-failing", url: failing.url },
      { id: "b-good", url: good.url },
    ]);
    const res = await send(p, await signedCall());
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.engine)).toBe("b-good");
    expect(failing.calls).toHaveLength(1);
    expect(good.calls).toHaveLength(1);
    expect(inFlightOn(p, "a-failing")).toBe(0);
    expect(await (await operatorGet(p.url, "/metrics")).text()).toMatch(/agentix_pool_retries_total\{engine="a-failing"\} 1/);
  });

  it("moves a call to another engine when the first refuses the connection, and takes that engine out", async () => {
    const good = await fakeEngine();
    const p = await pool([
      { id: "a-dead", url: await refusedUrl() },
      { id: "b-good", url: good.url },
    ], { metricsIntervalMs: 60_000 });
    const res = await send(p, await signedCall());
    expect(res.status).toBe(200);
    expect(res.headers.get(Header.engine)).toBe("b-good");
    expect(p.dispatcher.engineSnapshots().find((e) => e.id === "a-dead")?.healthy).toBe(false);
  });

  it("with no other engine free, requeues the call and retries it on the same engine", async () => {
    const flaky = await fakeEngine((index) => (index === 0 ? { kind: "status", status: 503 } : { kind: "json" }));
    const p = await pool([{ id: "only", url: flaky.url }]);
    const res = await send(p, await signedCall());
    expect(res.status).toBe(200);
    expect(flaky.calls).toHaveLength(2);
    expect(flaky.calls[1]?.headers.get("x-request-id")).toBe(flaky.calls[0]?.headers.get("x-request-id"));
  });

  it("relays an engine 4xx's status and message, without retrying", async () => {
    const rejecting = await fakeEngine(() => ({ kind: "status", status: 400 }));
    const other = await fakeEngine();
    const p = await pool([
      { id: "a", url: rejecting.url },
      { id: "b", url: other.url },
    ]);
    const res = await send(p, await signedCall());
    expect(res.status).toBe(400);
    expect(OpenAIErrorBody.parse(await res.json()).error.message).toBe("fake 400");
    expect(other.calls).toHaveLength(0);
  });

  it("answers 502 when every attempt fails", async () => {
    const a = await fakeEngine(() => ({ kind: "status", status: 500 }));
    const b = await fakeEngine(() => ({ kind: "status", status: 503 }));
    const p = await pool([
      { id: "a", url: a.url },
      { id: "b", url: b.url },
    ], { retries: 1 });
    const res = await send(p, await signedCall());
    expect(res.status).toBe(502);
    expect(OpenAIErrorBody.parse(await res.json()).error.code).toBe("engine_unavailable");
    expect(a.calls.length + b.calls.length).toBe(2);
  });
});

describe("relay", () => {
  it("relays a stream as it arrives, with the stats comment just before [DONE]: the queue and service times it caused", async () => {
    // Call 0 holds the only slot; the stream (call 1) waits in the queue until the test releases it.
    const engine = await fakeEngine((index) => (index === 0 ? held : { kind: "stream" }));
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }]);
    const blocker = send(p, await signedCall());
    await engine.call(0);

    const sentAt = Date.now();
    const response = send(p, await signedCall({ body: chatBody({ stream: true }) }));
    await waitFor(() => p.dispatcher.queuedCount === 1, "stream queued behind the blocker");
    const queuedBy = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 150));
    const releasedAt = Date.now();
    engine.calls[0]?.release();
    expect((await blocker).status).toBe(200);

    const res = await response;
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    const first = await events.read();
    const firstAt = Date.now();
    expect(first.value).toContain('"Hel"');
    // The engine has not finished: the first chunk came through on its own.
    expect(engine.calls[1]?.isFinished()).toBe(false);
    expect(engine.calls[1]?.body.stream_options).toEqual({ include_usage: true, continuous_usage_stats: true });

    // The engine holds the rest of its answer for 100 ms.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const restReleasedAt = Date.now();
    engine.calls[1]?.release();
    const rest: string[] = [];
    for (let next = await events.read(); !next.done; next = await events.read()) rest.push(next.value);
    const doneAt = Date.now();
    const doneIndex = rest.findIndex(isDoneEvent);
    expect(doneIndex).toBe(rest.length - 1);
    const stats = parseStatsEvent(rest[doneIndex - 1] ?? "");
    expect(stats).toMatchObject({ engine: "e1" });
    // Engine and queue time are headers from the start too (for a stream cut before the comment).
    expect(res.headers.get(Header.engine)).toBe("e1");
    expect(res.headers.get(Header.queueMs)).toBe(String(stats?.queueMs));
    // Queued from before `queuedBy` until after `releasedAt`, dispatched before the first chunk arrived (ms rounding: ±1).
    expect(stats?.queueMs).toBeGreaterThanOrEqual(releasedAt - queuedBy - 1);
    expect(stats?.queueMs).toBeLessThanOrEqual(firstAt - sentAt + 1);
    // Dispatched before the first chunk, last byte after the engine's hold; dispatched after the blocker's release.
    expect(stats?.serviceMs).toBeGreaterThanOrEqual(restReleasedAt - firstAt - 1);
    expect(stats?.serviceMs).toBeLessThanOrEqual(doneAt - releasedAt + 1);
    await waitFor(() => inFlightOn(p, "e1") === 0, "slot freed");
  });

  it("ends a stream the engine breaks off with an error event and the stats, but no [DONE]", async () => {
    const engine = await fakeEngine(() => ({ kind: "stream", breakAfterFirst: true }));
    const p = await pool([{ id: "e1", url: engine.url }]);
    const res = await send(p, await signedCall({ body: chatBody({ stream: true }) }));
    const events = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    expect((await events.read()).value).toContain('"Hel"');
    engine.calls[0]?.release();
    const rest: string[] = [];
    for (let next = await events.read(); !next.done; next = await events.read()) rest.push(next.value);
    expect(rest).toHaveLength(2);
    expect(JSON.parse(eventData(rest[0] ?? "") ?? "")).toMatchObject({ error: { code: "engine_stream_error", type: "server_error" } });
    expect(parseStatsEvent(rest[1] ?? "")).toMatchObject({ engine: "e1" });
    expect(rest.some(isDoneEvent)).toBe(false);
    await waitFor(() => inFlightOn(p, "e1") === 0, "slot freed");
  });

  it("relays a non-streaming answer with the stats headers", async () => {
    const engine = await fakeEngine();
    const p = await pool([{ id: "e1", url: engine.url, model: "served-model" }]);
    const res = await send(p, await signedCall());
    expect(res.status).toBe(200);
    expect(statsFromHeaders(res.headers)).toMatchObject({ engine: "e1" });
    const body = (await res.json()) as { model: string; usage: unknown };
    expect(body.usage).toMatchObject({ total_tokens: 7 });
    // The engine's model override replaced the client's.
    expect(engine.calls[0]?.body.model).toBe("served-model");
    expect(engine.calls[0]?.body.stream_options).toBeUndefined();
  });

  it("refuses a model outside the pool's models list (404 model_not_found) before the engine sees it, and serves a listed one", async () => {
    const engine = await fakeEngine();
    const p = await pool([{ id: "e1", url: engine.url }], { models: ["public-model"] });
    const refused = await send(p, await signedCall({ body: chatBody({ model: "my-lora-adapter" }) }));
    expect(refused.status).toBe(404);
    const body = OpenAIErrorBody.parse(await refused.json());
    expect(body.error).toMatchObject({ code: "model_not_found", param: "model", type: "invalid_request_error" });
    expect(engine.calls).toHaveLength(0);
    const served = await send(p, await signedCall({ body: chatBody({ model: "public-model" }) }));
    expect(served.status).toBe(200);
    expect(engine.calls.map((call) => call.body.model)).toEqual(["public-model"]);
    const metrics = await (await operatorGet(p.url, "/metrics")).text();
    expect(metrics).toMatch(/agentix_pool_rejected_requests_total\{reason="model_not_found"\} 1/);
  });

  it("charges a call its standalone engine work from the usage the engine reported, not the time the engine held it", async () => {
    const answer = () => ({ usage: { prompt: 3_000, completion: 40, cached: 1_000 } });
    const work = standaloneCallMs(decodeCostOf(resolveProfile("llama-3.1-8b-h100")), { promptTokens: 3_000, cachedTokens: 1_000, completionTokens: 40 });
    for (const service of ["work", "wall"] as const) {
      const engine = await startFakeEngine({ behave: () => held, answer });
      cleanups.push(() => engine.close());
      const p = await pool([{ id: "e1", url: engine.url, profile: "llama-3.1-8b-h100" }], { scheduling: { service } });
      const response = send(p, await signedCall());
      const call = await engine.call(0);
      await new Promise((resolve) => setTimeout(resolve, 400));
      call.release();
      const stats = statsFromHeaders((await response).headers);
      // Work: what the engine's cost model says 2,000 new prompt tokens and 40 outputs take alone (~0.35 s); wall: the 400 ms hold.
      if (service === "work") expect(stats?.serviceMs).toBe(Math.round(work));
      else expect(stats?.serviceMs).toBeGreaterThanOrEqual(399);
    }
    expect(work).toBeLessThan(390);
  });

  it("charges a stream the same way: its stats comment says the cost model's work, or the wall time without one", async () => {
    const answer = () => ({ usage: { prompt: 3_000, completion: 40, cached: 1_000 } });
    const work = standaloneCallMs(decodeCostOf(resolveProfile("llama-3.1-8b-h100")), { promptTokens: 3_000, cachedTokens: 1_000, completionTokens: 40 });
    for (const service of ["work", "wall"] as const) {
      const engine = await startFakeEngine({ behave: () => ({ kind: "stream" }), answer });
      cleanups.push(() => engine.close());
      const p = await pool([{ id: "e1", url: engine.url, profile: "llama-3.1-8b-h100" }], { scheduling: { service } });
      const response = send(p, await signedCall({ body: chatBody({ stream: true }) }));
      const call = await engine.call(0);
      await new Promise((resolve) => setTimeout(resolve, 400));
      call.release();
      const events: string[] = [];
      const reader = (await response).body!.pipeThrough(new SseEventSplitter()).getReader();
      for (let next = await reader.read(); !next.done; next = await reader.read()) events.push(next.value);
      const stats = parseStatsEvent(events[events.findIndex(isDoneEvent) - 1] ?? "");
      if (service === "work") expect(stats?.serviceMs).toBe(Math.round(work));
      else expect(stats?.serviceMs).toBeGreaterThanOrEqual(399);
    }
  });

  it("sends SGLang the inverted priority and an OpenAI server none", async () => {
    const sglang = await fakeEngine(() => held);
    const openai = await fakeEngine();
    const p = await pool([
      { id: "a-sglang", url: sglang.url, kind: "sglang" },
      { id: "b-openai", url: openai.url, kind: "openai" },
    ]);
    // Idle engines tie and the lowest id wins; while the first call is held there, the second goes to the other.
    const first = send(p, await signedCall());
    const held0 = await sglang.call(0);
    expect((await send(p, await signedCall())).status).toBe(200);
    held0.release();
    expect((await first).status).toBe(200);
    expect(held0.body.priority).toBe(DEFAULT_QUEUE_SETTINGS.levels - 1);
    expect(openai.calls).toHaveLength(1);
    expect(openai.calls[0]?.body).not.toHaveProperty("priority");
  });
});

describe("health, metrics and shutdown", () => {
  it("reports engines on /health and answers 503 when none is healthy", async () => {
    const engine = await fakeEngine();
    const p = await pool([{ id: "e1", url: engine.url }], { unhealthyAfterFailures: 2, noHealthyEngineGraceMs: 0 });
    const ok = await operatorGet(p.url, "/health");
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ ok: true, engines: [{ id: "e1", kind: "vllm", healthy: true }] });

    engine.setHealthy(false);
    await waitFor(() => !p.dispatcher.hasHealthyEngine(), "engine marked unhealthy");
    const down = await operatorGet(p.url, "/health");
    expect(down.status).toBe(503);
    expect(await down.json()).toMatchObject({ ok: false });

    const res = await send(p, await signedCall());
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(OpenAIErrorBody.parse(await res.json()).error.code).toBe("no_healthy_engine");
  });

  it("exposes its series on /metrics", async () => {
    const engine = await fakeEngine();
    const p = await pool([{ id: "e1", url: engine.url }]);
    expect((await send(p, await signedCall())).status).toBe(200);
    const res = await operatorGet(p.url, "/metrics");
    expect(res.headers.get("content-type")).toContain("text/plain");
    const text = await res.text();
    for (const series of [
      'agentix_pool_queue_depth{level="0"} 0',
      'agentix_pool_dispatches_total{engine="e1",reason="short-least-loaded"} 1',
      "agentix_pool_promotions_total 0",
      'agentix_pool_engine_in_flight{engine="e1"} 0',
      "agentix_pool_queue_seconds_count 1",
      'agentix_pool_service_seconds_count{engine="e1"} 1',
      "# TYPE agentix_pool_retries_total counter",
      "# TYPE agentix_pool_rejected_requests_total counter",
      'agentix_pool_calls_total{engine="e1",outcome="completed"} 1',
    ]) {
      expect(text).toContain(series);
    }
  });

  it("close() answers queued calls 503, aborts running ones and returns", async () => {
    const engine = await fakeEngine(() => held);
    const p = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url, maxInFlight: 1 }] }));
    const running = send(p, await signedCall());
    const runningCall = await engine.call(0);
    const queued = send(p, await signedCall());
    await waitFor(() => p.dispatcher.queuedCount === 1, "call queued");

    await p.close();
    const queuedRes = await queued;
    expect(queuedRes.status).toBe(503);
    expect(OpenAIErrorBody.parse(await queuedRes.json()).error.code).toBe("shutting_down");
    await runningCall.aborted;
    await running.catch(() => undefined);
    await expect(fetch(`${p.url}/health`)).rejects.toThrow();
  });
});

