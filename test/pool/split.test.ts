import { afterEach, describe, expect, it } from "vitest";
import { eventObject, isDoneEvent, SseEventSplitter } from "../../src/protocol/sse.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import type { EngineConfig } from "../../src/pool/config.js";
import { type FakeEngine, type FakeEngineOptions, startFakeEngine } from "./fake-engine.js";
import { chatBody, metricValue, operatorGet, signedCall, testConfig, waitFor } from "./helpers.js";

/*
 * Disaggregated calls through the pool with fake engines (issue 13): vLLM's two steps
 * (prefill with kv_transfer_params, then decode with the handoff) and SGLang's bootstrap
 * (both at once), and what happens when either side misbehaves.
 */

const HANDOFF = {
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_block_ids: [3, 4, 5],
  remote_engine_id: "prefill-engine-uuid",
  remote_request_id: "cmpl-prefill-1",
  remote_host: "10.0.0.7",
  remote_port: 5600,
  tp_size: 1,
};

const open: { engines: FakeEngine[]; pools: PoolHandle[] } = { engines: [], pools: [] };
afterEach(async () => {
  await Promise.all(open.pools.map((p) => p.close()));
  await Promise.all(open.engines.map((e) => e.close()));
  open.engines = [];
  open.pools = [];
});

async function engine(options: FakeEngineOptions = {}): Promise<FakeEngine> {
  const started = await startFakeEngine(options);
  open.engines.push(started);
  return started;
}

type EngineInput = { id: string; url: string; kind?: EngineConfig["kind"]; role?: EngineConfig["role"]; bootstrapPort?: number; maxInFlight?: number };

async function pool(engines: EngineInput[], retries = 2, routing?: "round-robin"): Promise<PoolHandle> {
  const started = await startPool(testConfig({ engines, retries, ...(routing === undefined ? {} : { scheduling: { routing: { policy: routing } } }) }));
  open.pools.push(started);
  return started;
}

const prefillEngine = (extra: Record<string, unknown> | null = { kv_transfer_params: HANDOFF }) =>
  engine({ answer: () => ({ usage: { prompt: 50, completion: 1 }, ...(extra === null ? {} : { extra }) }) });
const decodeEngine = (options: FakeEngineOptions = {}) =>
  engine({ behave: (call) => (call.body.stream === true ? { kind: "stream" } : { kind: "json" }), answer: () => ({ usage: { prompt: 50, completion: 7, cached: 48 } }), ...options });

async function send(p: PoolHandle, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  const call = await signedCall({ body });
  return fetch(`${p.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body, ...(signal ? { signal } : {}) });
}

async function events(response: Response): Promise<string[]> {
  const out: string[] = [];
  const reader = response.body!.pipeThrough(new SseEventSplitter()).getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) out.push(next.value);
  return out;
}

const metrics = async (p: PoolHandle) => (await operatorGet(p.url, "/metrics")).text();

/** Every slot given back and nothing left running: the call left the pool. */
async function settled(p: PoolHandle): Promise<void> {
  await waitFor(() => p.dispatcher.runningCount === 0 && p.dispatcher.engineSnapshots().every((e) => e.inFlight === 0), "every slot given back");
}

describe("vLLM disaggregated calls (kv_transfer_params)", () => {
  it("prefills with max_tokens 1 and a remote-decode request, then streams the decode engine's answer with the handoff", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    const client = chatBody({ stream: true, stream_options: { include_usage: true }, max_tokens: 64, min_tokens: 4, max_completion_tokens: 64 });
    const answer = await send(p, client);
    expect(answer.status).toBe(200);
    (await decode.call(0)).release();
    const stream = await events(answer);

    const prefillBody = (await prefill.call(0)).body;
    expect(prefillBody).toMatchObject({
      stream: false,
      max_tokens: 1,
      max_completion_tokens: 1,
      kv_transfer_params: { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null },
    });
    expect(prefillBody).not.toHaveProperty("stream_options");
    expect(prefillBody).not.toHaveProperty("min_tokens");
    const decodeBody = decode.calls[0]!.body;
    expect(decodeBody).toMatchObject({ stream: true, max_tokens: 64, min_tokens: 4, kv_transfer_params: HANDOFF });
    expect(decode.calls).toHaveLength(1);
    expect(prefill.calls).toHaveLength(1);

    // The client reads the decode engine's stream to its end; the stats name the prefill engine (the edge's affinity hint: the prefix is cached there).
    expect(stream.some((e) => e.includes('"Hel"'))).toBe(true);
    expect(stream.some((e) => isDoneEvent(e))).toBe(true);
    expect(stream.find((e) => e.startsWith(": agentix"))).toMatch(/"engine":"p1"/);
    expect(answer.headers.get("x-agentix-engine")).toBe("p1");

    // The client's usage: the prompt as the prefill engine ran it (none of it cached there), the output as the decode engine made it
    // (which had said 48 of the prompt's 50 tokens were cached: they came as KV).
    const usage = stream.map((e) => eventObject(e)?.usage).filter((u) => u !== undefined && u !== null).at(-1);
    expect(usage).toMatchObject({ prompt_tokens: 50, completion_tokens: 7, total_tokens: 57, prompt_tokens_details: { cached_tokens: 0 } });

    await settled(p);
    const text = await metrics(p);
    // Billed once: the prompt as the prefill engine reported it, the output as the decode engine did.
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="p1",kind="prompt",outcome="completed"}')).toBe(50);
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="p1",kind="completion",outcome="completed"}')).toBeUndefined();
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="d1",kind="completion",outcome="completed"}')).toBe(7);
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="d1",kind="prompt",outcome="completed"}')).toBeUndefined();
    expect(metricValue(text, 'agentix_pool_split_handoffs_total{outcome="handed_off"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_calls_total{engine="p1",outcome="completed"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_calls_total{engine="d1",outcome="completed"}')).toBe(1);
  });

  it("answers a non-streaming call with the decode engine's JSON", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    const answer = await send(p, chatBody({ max_tokens: 16 }));
    expect(answer.status).toBe(200);
    const json = (await answer.json()) as { usage: Record<string, unknown> };
    expect(json.usage).toMatchObject({ prompt_tokens: 50, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 0 } });
    expect(decode.calls[0]!.body).toMatchObject({ max_tokens: 16, kv_transfer_params: HANDOFF });
    expect(decode.calls[0]!.body.stream).toBeUndefined();
    await settled(p);
  });

  it("sends the decode without kv_transfer_params when the prefill engine gave none (the decode engine computes the prompt)", async () => {
    const prefill = await prefillEngine(null);
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    const answer = await send(p, chatBody({ max_tokens: 16 }));
    expect(answer.status).toBe(200);
    expect(decode.calls[0]!.body).not.toHaveProperty("kv_transfer_params");
    // The decode engine computed the prompt itself: its own usage is the bill.
    expect(((await answer.json()) as { usage: Record<string, unknown> }).usage).toMatchObject({ prompt_tokens_details: { cached_tokens: 48 } });
    await settled(p);
    expect(metricValue(await metrics(p), 'agentix_pool_split_handoffs_total{outcome="no_kv_transfer_params"}')).toBe(1);
  });

  it("retries a prefill that fails before its first byte on another prefill engine, as any attempt", async () => {
    const failing = await engine({ behave: () => ({ kind: "status", status: 503 }) });
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await pool([
      { id: "a-failing", url: failing.url, role: "prefill" },
      { id: "b-prefill", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    // Two calls, so the least-loaded routing puts one on the failing engine whatever its order.
    const answers = await Promise.all([send(p, chatBody({ max_tokens: 8 })), send(p, chatBody({ max_tokens: 8 }))]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(failing.calls.length).toBeGreaterThanOrEqual(1);
    expect(prefill.calls).toHaveLength(2);
    expect(decode.calls).toHaveLength(2);
    await settled(p);
  });

  it("passes a prefill engine's 4xx to the client and sends nothing to decode", async () => {
    const prefill = await engine({ behave: () => ({ kind: "status", status: 400 }) });
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    const answer = await send(p, chatBody({ max_tokens: 8 }));
    expect(answer.status).toBe(400);
    expect(decode.calls).toHaveLength(0);
    await settled(p);
  });

  it("recomputes the call whole on a mixed engine when the decode engine refuses the handoff before its first byte", async () => {
    const prefill = await prefillEngine();
    const refusing = await engine({ behave: () => ({ kind: "status", status: 500 }) });
    const mixed = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: refusing.url, role: "decode" },
      { id: "m1", url: mixed.url, role: "mixed" },
    ], 2, "round-robin");
    // Round robin over the engines that start calls (p1, m1): the first goes to p1.
    const first = await send(p, chatBody({ max_tokens: 8, stream: true }));
    expect(first.status).toBe(200);
    const stream = await (async () => {
      (await mixed.call(0)).release();
      return events(first);
    })();
    expect(stream.some((e) => isDoneEvent(e))).toBe(true);
    await settled(p);
    expect(prefill.calls).toHaveLength(1);
    expect(refusing.calls).toHaveLength(1);
    expect(refusing.calls[0]!.body).toMatchObject({ kv_transfer_params: HANDOFF });
    // The mixed engine got the call as the client sent it: no handoff, its own budget.
    expect(mixed.calls[0]!.body).not.toHaveProperty("kv_transfer_params");
    expect(mixed.calls[0]!.body).toMatchObject({ max_tokens: 8, stream: true });
    const text = await metrics(p);
    expect(metricValue(text, 'agentix_pool_split_handoffs_total{outcome="decode_failed"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_retries_total{engine="d1"}')).toBe(1);
  });

  it("recomputes on another decode engine (without the handoff) when no engine is mixed, and fails with 502 once retries run out", async () => {
    const prefill = await prefillEngine();
    const refusing = await engine({ behave: () => ({ kind: "status", status: 500 }) });
    const other = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1-refusing", url: refusing.url, role: "decode" },
      { id: "d2-other", url: other.url, role: "decode" },
    ]);
    // Both decode engines are empty: the one with the most room on a tie is the first by ID (d1-refusing).
    const answer = await send(p, chatBody({ max_tokens: 8 }));
    expect(answer.status).toBe(200);
    expect(refusing.calls).toHaveLength(1);
    expect(other.calls).toHaveLength(1);
    expect(other.calls[0]!.body).not.toHaveProperty("kv_transfer_params");
    await settled(p);

    const noRetries = await pool(
      [
        { id: "p1", url: prefill.url, role: "prefill" },
        { id: "d1-refusing", url: refusing.url, role: "decode" },
      ],
      0,
    );
    const failed = await send(noRetries, chatBody({ max_tokens: 8 }));
    expect(failed.status).toBe(502);
    expect(((await failed.json()) as { error: { code: string } }).error.code).toBe("engine_unavailable");
    await settled(noRetries);
  });

  it("holds a prefilled call's decode while the decode engine is at its cap, and sends it when the engine's call ends", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode", maxInFlight: 1 },
    ]);
    const first = await send(p, chatBody({ stream: true, max_tokens: 8 }));
    const firstDecode = await decode.call(0);
    const second = send(p, chatBody({ stream: true, max_tokens: 8 }));
    // The second call is prefilled, but its decode waits: the decode engine never has two.
    await prefill.call(1);
    await waitFor(async () => metricValue(await metrics(p), 'agentix_pool_decodes_held_total{reason="count"}') === 1, "the decode held");
    expect(decode.calls).toHaveLength(1);
    expect(decode.inFlight()).toBe(1);
    firstDecode.release();
    expect((await events(first)).some((e) => isDoneEvent(e))).toBe(true);
    (await decode.call(1)).release();
    expect(decode.calls[1]!.body).toMatchObject({ kv_transfer_params: HANDOFF });
    expect((await events(await second)).some((e) => isDoneEvent(e))).toBe(true);
    await settled(p);
    expect(metricValue(await metrics(p), 'agentix_pool_split_handoffs_total{outcome="handed_off"}')).toBe(2);
  });

  it("counts a held decode's context as decode demand for the role controller while it waits", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await startPool(
      testConfig({
        engines: [
          { id: "p1", url: prefill.url, role: "prefill", profile: "llama-3.1-8b-h100" },
          { id: "d1", url: decode.url, role: "decode", maxInFlight: 1, profile: "llama-3.1-8b-h100" },
        ],
        // Rounds far off: the test reads the meter itself.
        roles: { controller: "ratio", roundMs: 600_000 },
      }),
    );
    open.pools.push(p);
    const first = await send(p, chatBody({ stream: true, max_tokens: 8 }));
    const firstDecode = await decode.call(0);
    const second = send(p, chatBody({ stream: true, max_tokens: 8 }));
    await prefill.call(1);
    await waitFor(() => p.dispatcher.heldDecodes === 1, "the second call's decode held");
    const noEngineKv = { decodeKvTokens: 0, prefillQueue: 0, decodeKvUsage: 0 };
    // The first call decodes (its KV is the engine's now); the held one's prompt waits for decode room.
    expect(p.roleControl!.meter.read(Date.now(), noEngineKv).decodeKvTokens).toBeGreaterThan(0);
    firstDecode.release();
    (await decode.call(1)).release();
    expect((await events(first)).some((e) => isDoneEvent(e))).toBe(true);
    expect((await events(await second)).some((e) => isDoneEvent(e))).toBe(true);
    await settled(p);
    expect(p.roleControl!.meter.read(Date.now(), noEngineKv).decodeKvTokens).toBe(0);
  });

  it("a held decode whose client leaves is gone at once: off the held list, answered once, never sent to the decode engine", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    // No engine readings during the test: nothing pumps but the calls themselves, so "at once" is not the next reading's doing.
    const p = await startPool(
      testConfig({
        engines: [
          { id: "p1", url: prefill.url, role: "prefill" },
          { id: "d1", url: decode.url, role: "decode", maxInFlight: 1 },
        ],
        metricsIntervalMs: 60_000,
        saturatedMetricsIntervalMs: 60_000,
      }),
    );
    open.pools.push(p);
    const first = await send(p, chatBody({ stream: true, max_tokens: 8 }));
    const firstDecode = await decode.call(0);
    const client = new AbortController();
    const second = send(p, chatBody({ stream: true, max_tokens: 8 }), client.signal).catch((error: unknown) => error);
    await prefill.call(1);
    await waitFor(() => p.dispatcher.heldDecodes === 1, "the second call's decode held");
    client.abort();
    expect(await second).toBeInstanceOf(Error);
    // The first call still runs on the decode engine: no call ended, no pump ran, and the held call is gone all the same.
    await waitFor(() => p.dispatcher.heldDecodes === 0, "the held decode gone");
    expect(decode.inFlight()).toBe(1);
    const text = await metrics(p);
    expect(metricValue(text, 'agentix_pool_cancelled_calls_total{stage="held_decode"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_cancelled_calls_total{stage="running"}')).toBeUndefined();
    // Nothing of it is left in the pool: only the first call.
    expect(p.dispatcher.runningCount).toBe(1);
    firstDecode.release();
    expect((await events(first)).some((e) => isDoneEvent(e))).toBe(true);
    await settled(p);
    // Its decode was never sent, and it was counted once.
    expect(decode.calls).toHaveLength(1);
    expect(metricValue(await metrics(p), 'agentix_pool_cancelled_calls_total{stage="held_decode"}')).toBe(1);
    expect(p.dispatcher.heldDecodes).toBe(0);
  });

  it("ends a split call whose client goes away mid-decode: both legs' slots back, the call gone once", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, role: "prefill" },
      { id: "d1", url: decode.url, role: "decode" },
    ]);
    const client = new AbortController();
    const answer = await send(p, chatBody({ stream: true, max_tokens: 64 }), client.signal);
    const decodeCall = await decode.call(0);
    const reader = answer.body!.getReader();
    await reader.read();
    client.abort();
    await decodeCall.aborted;
    await settled(p);
    expect(metricValue(await metrics(p), 'agentix_pool_calls_total{engine="d1",outcome="aborted"}')).toBe(1);
  });
});

describe("disaggregated calls under TAO placement and other APIs", () => {
  it("places a call's prefill by TAO's plan on a prefill engine only, and answers a Messages call from the decode engine", async () => {
    const prefill = await prefillEngine();
    const decode = await decodeEngine();
    const started = await startPool(
      testConfig({
        engines: [
          { id: "d1", url: decode.url, role: "decode" },
          { id: "p1", url: prefill.url, role: "prefill" },
        ],
        scheduling: { placement: "tao" },
      }),
    );
    open.pools.push(started);
    const answers = await Promise.all(Array.from({ length: 4 }, () => send(started, chatBody({ max_tokens: 8 }))));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(prefill.calls).toHaveLength(4);
    expect(decode.calls).toHaveLength(4);
    expect(decode.calls.every((c) => c.body.kv_transfer_params !== undefined)).toBe(true);

    // A Messages call goes split as chat completions, and its answer comes back in Anthropic's shape.
    const call = await signedCall({ path: "/v1/messages", body: { model: "test-model", max_tokens: 8, messages: [{ role: "user", content: "hi" }] } });
    const messages = await fetch(`${started.url}/v1/messages`, { method: "POST", headers: call.headers, body: call.body });
    expect(messages.status).toBe(200);
    expect(((await messages.json()) as { type: string }).type).toBe("message");
    expect(prefill.calls[4]!.body).toMatchObject({ max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    await settled(started);
  });
});

describe("SGLang disaggregated calls (bootstrap)", () => {
  it("sends the same body with bootstrap host, port and room to the prefill and the decode engine at once; the decode's answer is the client's", async () => {
    const prefill = await engine({ behave: (call) => (call.body.stream === true ? { kind: "stream" } : { kind: "json" }), answer: () => ({ usage: { prompt: 50, completion: 1 } }) });
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, kind: "sglang", role: "prefill", bootstrapPort: 9123 },
      { id: "d1", url: decode.url, kind: "sglang", role: "decode" },
    ]);
    const answer = await send(p, chatBody({ stream: true, max_tokens: 32 }));
    const [prefillCall, decodeCall] = await Promise.all([prefill.call(0), decode.call(0)]);
    prefillCall.release();
    decodeCall.release();
    const stream = await events(answer);
    expect(stream.some((e) => isDoneEvent(e))).toBe(true);
    const room = prefillCall.body.bootstrap_room;
    expect(typeof room).toBe("number");
    for (const body of [prefillCall.body, decodeCall.body]) {
      expect(body).toMatchObject({ bootstrap_host: "127.0.0.1", bootstrap_port: 9123, bootstrap_room: room, stream: true, max_tokens: 32 });
    }
    await settled(p);
    expect(prefill.inFlight()).toBe(0);
    const text = await metrics(p);
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="p1",kind="prompt",outcome="completed"}')).toBe(50);
    expect(metricValue(text, 'agentix_pool_engine_tokens_total{engine="d1",kind="completion",outcome="completed"}')).toBe(7);
  });

  it("bills the prompt as the prefill engine computed it, not as the decode engine counts it, even when the prefill's answer ends last", async () => {
    // As SGLang runs a PD call: the prefill server answers the call itself (one token, its own prefix hit as cached_tokens); the
    // decode server's cached_tokens is its own arithmetic over the handed-over KV (decode.py _commit_transfer_to_req,
    // decode_schedule_batch_mixin.py prepare_for_prebuilt_extend), here none of it.
    const sglangPrefill = await engine({
      behave: (call) => (call.body.stream === true ? { kind: "stream" } : { kind: "json", hold: true }),
      answer: () => ({ usage: { prompt: 50, completion: 1, cached: 32 } }),
    });
    const sglangDecode = await engine({
      behave: (call) => (call.body.stream === true ? { kind: "stream" } : { kind: "json" }),
      answer: () => ({ usage: { prompt: 50, completion: 7, cached: 0 } }),
    });
    const p = await pool([
      { id: "p1", url: sglangPrefill.url, kind: "sglang", role: "prefill" },
      { id: "d1", url: sglangDecode.url, kind: "sglang", role: "decode" },
    ]);
    const streamed = await send(p, chatBody({ stream: true, stream_options: { include_usage: true }, max_tokens: 32 }));
    const [prefillCall, decodeCall] = await Promise.all([sglangPrefill.call(0), sglangDecode.call(0)]);
    // The decode finishes first: its usage chunk waits for the prefill's answer, whose figures it then carries.
    decodeCall.release();
    const reading = events(streamed);
    await new Promise((resolve) => setTimeout(resolve, 50));
    prefillCall.release();
    const usage = (await reading).map((e) => eventObject(e)?.usage).filter((u) => u !== undefined && u !== null).at(-1);
    expect(usage).toMatchObject({ prompt_tokens: 50, completion_tokens: 7, total_tokens: 57, prompt_tokens_details: { cached_tokens: 32 } });

    // The pool answers once both legs have started: the held prefill answer is let go first.
    const answering = send(p, chatBody({ max_tokens: 32 }));
    (await sglangPrefill.call(1)).release();
    const whole = await answering;
    expect(((await whole.json()) as { usage: Record<string, unknown> }).usage).toMatchObject({ prompt_tokens: 50, completion_tokens: 7, prompt_tokens_details: { cached_tokens: 32 } });
    await settled(p);
  });

  it("drops the decode and retries when the prefill engine fails before its first byte", async () => {
    let failures = 1;
    const prefill = await engine({ behave: () => (failures-- > 0 ? { kind: "status", status: 503 } : { kind: "json" }) });
    const decode = await decodeEngine();
    const p = await pool([
      { id: "p1", url: prefill.url, kind: "sglang", role: "prefill" },
      { id: "d1", url: decode.url, kind: "sglang", role: "decode" },
    ]);
    const answer = await send(p, chatBody({ max_tokens: 8 }));
    expect(answer.status).toBe(200);
    // The first attempt's decode was dropped, the second answered.
    expect(prefill.calls).toHaveLength(2);
    expect(decode.calls).toHaveLength(2);
    expect(decode.calls[0]!.body.bootstrap_room).not.toBe(decode.calls[1]!.body.bootstrap_room);
    await settled(p);
  });
});
