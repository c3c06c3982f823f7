import { afterEach, describe, expect, it } from "vitest";
import { ChatCompletion } from "../../src/protocol/chat.js";
import { Header } from "../../src/protocol/headers.js";
import { isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { type FakeBehavior, type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { chatBody, metricValue, operatorGet, type SignedCall, signedCall, signedEvents, testConfig, waitFor } from "./helpers.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type EngineInput = PoolConfigInput["engines"][number];

async function pool(engines: EngineInput[], placement: "routing" | "tao", tao: Record<string, unknown> = {}): Promise<PoolHandle> {
  const handle = await startPool(testConfig({ engines, scheduling: { placement, tao: { planIntervalMs: 50, ...tao } } }));
  cleanups.push(() => handle.close());
  return handle;
}

/** A fake engine that reports the usage a real one would for long prompts (4 characters a token). */
async function fakeEngine(behave?: (index: number) => FakeBehavior): Promise<FakeEngine> {
  const engine = await startFakeEngine({
    ...(behave ? { behave: (call) => behave(call.index) } : {}),
    answer: (call) => {
      const messages = call.body.messages as { content: string }[];
      const prompt = Math.ceil(messages.reduce((n, m) => n + m.content.length, 0) / 4);
      return { usage: { prompt, completion: 50, cached: 0 } };
    },
  });
  cleanups.push(() => engine.close());
  return engine;
}

const send = (p: PoolHandle, call: SignedCall) => fetch(`${p.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });
const metricsOf = async (p: PoolHandle) => (await operatorGet(p.url, "/metrics")).text();
const engineOf = (p: PoolHandle, id: string) => p.dispatcher.engineSnapshots().find((e) => e.id === id);

/** A long-context call of the program: ~10k tokens of history, with no affinity hint from the edge. */
const longCall = (program: string, turn: number) =>
  signedCall({
    fields: { program, engine: "" },
    body: chatBody({ messages: [{ role: "user", content: `${"history ".repeat(5_000)} turn ${turn}` }] }),
  });

describe("placement: tao, end to end", () => {
  it("serves calls end to end against simulated vLLM engines, JSON and streams, placed by plans", async () => {
    const sims: SimEngineHandle[] = await Promise.all([startSimEngine({ timeScale: 1_000 }), startSimEngine({ timeScale: 1_000 })]);
    cleanups.push(async () => void (await Promise.all(sims.map((s) => s.close()))));
    const p = await pool(sims.map((s, i) => ({ id: `sim${i}`, url: s.url })), "tao", { reservationTtlMs: 200 });
    const body = (extra: Record<string, unknown> = {}) => chatBody({ model: DEFAULT_SIM_MODEL, max_tokens: 8, ...extra });

    const programs = ["prog_taoe2e0001", "prog_taoe2e0002", "prog_taoe2e0003", "prog_taoe2e0004"];
    for (let turn = 0; turn < 2; turn++) {
      const answers = await Promise.all(
        programs.map(async (program, i) => {
          const stream = i % 2 === 1;
          const res = await send(p, await signedCall({ fields: { program }, body: body(stream ? { stream: true } : {}) }));
          expect(res.status).toBe(200);
          if (!stream) {
            expect(ChatCompletion.parse(await res.json()).usage?.completion_tokens).toBeGreaterThan(0);
            return res.headers.get(Header.engine);
          }
          const events: string[] = [];
          const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
          for (let next = await reader.read(); !next.done; next = await reader.read()) events.push(next.value);
          expect(isDoneEvent(events.at(-1) ?? "")).toBe(true);
          return "stream";
        }),
      );
      expect(answers.every((engine) => engine !== null)).toBe(true);
    }
    await waitFor(() => p.dispatcher.runningCount === 0, "all calls finished");
    const text = await metricsOf(p);
    expect(metricValue(text, 'agentix_pool_tao_plans_total{method="dp"}')).toBeGreaterThan(0);
    const planned = ["sim0", "sim1"].reduce((n, e) => n + (metricValue(text, `agentix_pool_dispatches_total{engine="${e}",reason="tao-plan"}`) ?? 0), 0);
    expect(planned).toBe(8);
    // The simulated engines report usage with cached tokens: the ledger saw every call.
    expect((metricValue(text, 'agentix_pool_cache_observations_total{engine="sim0",usage="reported"}') ?? 0) + (metricValue(text, 'agentix_pool_cache_observations_total{engine="sim1",usage="reported"}') ?? 0)).toBe(8);
    // Turn 2 came right after turn 1, so the observed gaps predict the programs back at once: the pool may
    // hold slots for them (reservations, counted in inFlight). Once those run out, every slot is back.
    const held = p.dispatcher.taoStats()?.reservationsHeld ?? 0;
    expect(p.dispatcher.engineSnapshots().reduce((n, e) => n + e.inFlight, 0)).toBe(held);
    await waitFor(() => p.dispatcher.engineSnapshots().every((e) => e.inFlight === 0), "reservations expired");
  });

  for (const placement of ["tao", "routing"] as const) {
    it(`${placement === "tao" ? "places" : "(control) routing does not place"} a long-context program's call on the engine holding its cache, though the other is less loaded`, async () => {
      const engines = [await fakeEngine(), await fakeEngine()];
      const p = await pool(engines.map((e, i) => ({ id: `e${i + 1}`, url: e.url })), placement);
      const program = "prog_longcontext1";
      const first = await send(p, await longCall(program, 1));
      expect(first.status).toBe(200);
      const warm = first.headers.get(Header.engine)!;
      const other = warm === "e1" ? "e2" : "e1";
      const warmIndex = warm === "e1" ? 0 : 1;
      if (placement === "tao") {
        const seen = (await (await operatorGet(p.url, `/tao/programs/${program}`)).json()) as { cache_credit_tokens: Record<string, number> };
        expect(seen.cache_credit_tokens[warm]).toBeGreaterThan(10_000);
      }

      // The warm engine is now the busier one: three requests waiting in its own queue.
      engines[warmIndex]!.setMetrics('vllm:num_requests_waiting{model_name="m"} 3\nvllm:kv_cache_usage_perc{model_name="m"} 0.2\n');
      await waitFor(() => engineOf(p, warm)?.waiting === 3, "the busier reading");

      const second = await send(p, await longCall(program, 2));
      expect(second.status).toBe(200);
      expect(second.headers.get(Header.engine)).toBe(placement === "tao" ? warm : other);
      const text = await metricsOf(p);
      if (placement === "tao") expect(metricValue(text, `agentix_pool_dispatches_total{engine="${warm}",reason="tao-plan"}`)).toBe(2);
      else expect(metricValue(text, `agentix_pool_dispatches_total{engine="${other}",reason="long-no-affinity"}`)).toBe(1);
    });
  }

  it("reserves a slot for a program whose tool finishes soon, and its next call takes it", async () => {
    const engines = [await fakeEngine(), await fakeEngine()];
    const p = await pool(engines.map((e, i) => ({ id: `e${i + 1}`, url: e.url })), "tao");
    const program = "prog_reserved01";
    const first = await send(p, await longCall(program, 1));
    const warm = first.headers.get(Header.engine)!;

    const event = await signedEvents({ fields: { program }, events: [{ type: "tool_started", tool: "bash", expected_duration_ms: 400 }] });
    expect((await fetch(`${p.url}/v1/events`, { method: "POST", headers: event.headers, body: event.body })).status).toBe(202);
    await waitFor(() => p.dispatcher.taoStats()?.reservationsHeld === 1, "the reservation");
    // The placeholder holds one of the warm engine's slots.
    expect(engineOf(p, warm)?.inFlight).toBe(1);

    const second = await send(p, await longCall(program, 2));
    expect(second.status).toBe(200);
    expect(second.headers.get(Header.engine)).toBe(warm);
    const text = await metricsOf(p);
    expect(metricValue(text, `agentix_pool_dispatches_total{engine="${warm}",reason="tao-reserved"}`)).toBe(1);
    expect(metricValue(text, 'agentix_pool_tao_reservations_total{outcome="held"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_tao_reservations_total{outcome="used"}')).toBe(1);
    // No slot leaked: the call took the placeholder's, and gave it back when it finished.
    await waitFor(() => p.dispatcher.engineSnapshots().every((e) => e.inFlight === 0), "slots back");
  });

  it("lets an unused reservation expire and gives its slot back", async () => {
    const engines = [await fakeEngine()];
    const p = await pool([{ id: "e1", url: engines[0]!.url }], "tao", { reservationTtlMs: 100 });
    const program = "prog_expires001";
    expect((await send(p, await longCall(program, 1))).status).toBe(200);
    const event = await signedEvents({ fields: { program }, events: [{ type: "tool_started", expected_duration_ms: 200 }] });
    expect((await fetch(`${p.url}/v1/events`, { method: "POST", headers: event.headers, body: event.body })).status).toBe(202);
    await waitFor(() => p.dispatcher.taoStats()?.reservationsHeld === 1, "the reservation");
    await waitFor(() => p.dispatcher.taoStats()?.reservationsHeld === 0 && engineOf(p, "e1")?.inFlight === 0, "the slot back");
    expect(metricValue(await metricsOf(p), 'agentix_pool_tao_reservations_total{outcome="expired"}')).toBeGreaterThanOrEqual(1);
  });

  it("keeps the queue's priority order: a light program's call goes before a heavy one's", async () => {
    const engine = await fakeEngine(() => ({ kind: "json", hold: true }));
    const p = await pool([{ id: "e1", url: engine.url, maxInFlight: 1 }], "tao");
    const first = send(p, await signedCall({ fields: { program: "prog_firstcall1" } }));
    await engine.call(0);
    const heavyCall = await signedCall({ fields: { program: "prog_heavycall1", serviceMs: 100_000, pathMs: 100_000 } });
    const lightCall = await signedCall({ fields: { program: "prog_lightcall1", serviceMs: 300, pathMs: 300 } });
    const heavy = send(p, heavyCall);
    await waitFor(() => p.dispatcher.queuedCount === 1, "heavy queued");
    const light = send(p, lightCall);
    await waitFor(() => p.dispatcher.queuedCount === 2, "light queued");
    engine.calls[0]?.release();
    expect((await first).status).toBe(200);
    const second = await engine.call(1);
    expect(second.headers.get("x-request-id")).toBe(lightCall.fields.call);
    second.release();
    expect((await light).status).toBe(200);
    const third = await engine.call(2);
    expect(third.headers.get("x-request-id")).toBe(heavyCall.fields.call);
    third.release();
    expect((await heavy).status).toBe(200);
  });

  it("holds a program the plan leaves out for want of KV, and places it once a call ends and frees the room", async () => {
    const engine = await fakeEngine(() => ({ kind: "json", hold: true }));
    // 30,000 KV tokens, 80 % plannable: two ~10k-token contexts fit, a third does not.
    const p = await pool([{ id: "e1", url: engine.url, kvCapacityTokens: 30_000 }], "tao", { holdLeftOutMs: 60_000 });
    const first = send(p, await longCall("prog_kvadmit0001", 1));
    const firstCall = await engine.call(0);
    const second = send(p, await longCall("prog_kvadmit0002", 1));
    await engine.call(1);
    const third = send(p, await longCall("prog_kvadmit0003", 1));
    await waitFor(async () => metricValue(await metricsOf(p), "agentix_pool_tao_held_programs") === 1, "the third program held");
    // Slots are free (the engine's buffer is 64): only KV keeps it out.
    expect(engine.inFlight()).toBe(2);
    firstCall.release();
    expect((await first).status).toBe(200);
    const thirdCall = await engine.call(2);
    thirdCall.release();
    expect((await third).status).toBe(200);
    engine.calls[1]?.release();
    expect((await second).status).toBe(200);
    const text = await metricsOf(p);
    expect(metricValue(text, 'agentix_pool_dispatches_total{engine="e1",reason="tao-plan"}')).toBe(3);
    expect(metricValue(text, "agentix_pool_tao_held_programs")).toBe(0);
  });

  it("routes a call no plan can place (no KV room anywhere) once it has waited holdLeftOutMs, instead of starving it", async () => {
    const engine = await fakeEngine();
    const p = await pool([{ id: "e1", url: engine.url, kvCapacityTokens: 4_096 }], "tao", { holdLeftOutMs: 300 });
    const started = performance.now();
    const res = await send(p, await longCall("prog_nokvroom01", 1));
    expect(res.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(300);
    const text = await metricsOf(p);
    expect(metricValue(text, 'agentix_pool_dispatches_total{engine="e1",reason="long-no-affinity"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_dispatches_total{engine="e1",reason="tao-plan"}')).toBeUndefined();
  });
});
