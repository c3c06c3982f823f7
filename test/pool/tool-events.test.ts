import { afterEach, describe, expect, it } from "vitest";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { Header } from "../../src/protocol/headers.js";
import { SseEventSplitter } from "../../src/protocol/sse.js";
import { ToolEventsAccepted } from "../../src/protocol/tool-events.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeAnswer, type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { chatBody, metricValue, operatorHeaders, type SignedCall, signedCall, signedEvents, testConfig, waitFor } from "./helpers.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(answer?: () => FakeAnswer, extra: Partial<PoolConfigInput> = {}): Promise<{ engine: FakeEngine; pool: PoolHandle }> {
  const engine = await startFakeEngine(answer ? { answer } : {});
  cleanups.push(() => engine.close());
  const pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }], ...extra }));
  cleanups.push(() => pool.close());
  return { engine, pool };
}

const postEvents = (pool: PoolHandle, signed: SignedCall) => pool.app.request("/v1/events", { method: "POST", headers: signed.headers, body: signed.body });
const postCall = (pool: PoolHandle, signed: SignedCall) => pool.app.request("/v1/chat/completions", { method: "POST", headers: signed.headers, body: signed.body });
const metricsOf = async (pool: PoolHandle) => (await pool.app.request("/metrics", { headers: operatorHeaders() })).text();

interface Inspection {
  program_id: string;
  placement: string;
  live_calls: number;
  context_tokens: number;
  readiness: { status: string; ready_at: number | null; source: string | null; made_at: number | null };
  cache_credit_tokens: Record<string, number>;
}

async function inspect(pool: PoolHandle, programId: string): Promise<Inspection> {
  const res = await pool.app.request(`/tao/programs/${programId}`, { headers: operatorHeaders() });
  expect(res.status).toBe(200);
  return (await res.json()) as Inspection;
}

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  const body = OpenAIErrorBody.parse(await res.json());
  expect(body.error.code).toBe(code);
  return body.error;
}

describe("POST /v1/events: verified exactly like calls", () => {
  it("accepts a signed batch and feeds the readiness predictor", async () => {
    const { pool } = await setup();
    const program = "prog_events0001";
    const signed = await signedEvents({
      fields: { program },
      events: [
        { type: "tool_started", tool: "bash", tool_call_id: "c1", expected_duration_ms: 800 },
        { type: "tool_started", tool: "grep", tool_call_id: "c2", thread: "side" },
      ],
    });
    const res = await postEvents(pool, signed);
    expect(res.status).toBe(202);
    expect(ToolEventsAccepted.parse(await res.json())).toEqual({ accepted: 2 });
    const seen = await inspect(pool, program);
    expect(seen).toMatchObject({ program_id: program, placement: "routing", live_calls: 0 });
    expect(seen.readiness).toMatchObject({ status: "pending", source: expect.any(String) });
    const text = await metricsOf(pool);
    expect(metricValue(text, 'agentix_pool_tool_events_total{type="tool_started",outcome="applied"}')).toBe(2);
    // The phase waits for both runs: the hinted one, then the one only the fallback guess covers.
    expect(metricValue(text, 'agentix_pool_readiness_predictions_total{source="client-hint"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_readiness_predictions_total{source="fallback"}')).toBe(1);
  });

  it("rejects unsigned, wrongly signed, tampered, stale and replayed batches, changing nothing", async () => {
    const { pool } = await setup();
    const program = "prog_events0002";
    const signed = await signedEvents({ fields: { program } });
    const { [Header.signature]: _dropped, ...unsigned } = signed.headers;
    await expectError(await postEvents(pool, { ...signed, headers: unsigned }), 401, "missing_signature");
    await expectError(await postEvents(pool, await signedEvents({ fields: { program }, secret: "someone-elses-secret-value" })), 401, "invalid_signature");
    await expectError(
      await postEvents(pool, { ...signed, body: JSON.stringify({ events: [{ type: "tool_finished", thread: "main" }] }) }),
      401,
      "invalid_signature",
    );
    await expectError(await postEvents(pool, { ...signed, headers: { ...signed.headers, [Header.program]: "prog_someoneelse1" } }), 401, "invalid_signature");
    await expectError(await postEvents(pool, await signedEvents({ fields: { program, ts: Date.now() - 31_000 } })), 401, "stale_timestamp");
    expect((await pool.app.request(`/tao/programs/${program}`, { headers: operatorHeaders() })).status).toBe(404);

    expect((await postEvents(pool, signed)).status).toBe(202);
    await expectError(await postEvents(pool, signed), 401, "replayed_call");
    const resigned = await signedEvents({ fields: { program, call: signed.fields.call } });
    await expectError(await postEvents(pool, resigned), 401, "replayed_call");
    expect(metricValue(await metricsOf(pool), 'agentix_pool_tool_events_total{type="tool_started",outcome="applied"}')).toBe(1);
  });

  it("answers a signed batch with a bad body 400, naming the field", async () => {
    const { pool } = await setup();
    const error = await expectError(
      await postEvents(pool, await signedEvents({ events: [{ type: "tool_started", expected_duration_ms: -1 }] })),
      400,
      "invalid_request",
    );
    expect(error.param).toBe("events.0.expected_duration_ms");
    await expectError(await postEvents(pool, await signedEvents({ body: "{not json" })), 400, "invalid_json");
  });

  it("keeps event batch IDs apart from call IDs: a flood of one cannot fill the other's replay set", async () => {
    const { pool } = await setup(undefined, { replayCapacity: 2 });
    for (let i = 0; i < 2; i++) expect((await postEvents(pool, await signedEvents())).status).toBe(202);
    await expectError(await postEvents(pool, await signedEvents()), 503, "replay_cache_full");
    expect((await postCall(pool, await signedCall())).status).toBe(200);
  });

  it("drops a tool_finished that arrives after the program's next call", async () => {
    const program = "prog_events0003";
    // The next call is running when the finish of the previous tool arrives.
    const held = await startFakeEngine({ behave: () => ({ kind: "json", hold: true }) });
    cleanups.push(() => held.close());
    const heldPool = await startPool(testConfig({ engines: [{ id: "e1", url: held.url }] }));
    cleanups.push(() => heldPool.close());
    const first = postCall(heldPool, await signedCall({ fields: { program } }));
    (await held.call(0)).release();
    expect((await first).status).toBe(200);
    const second = postCall(heldPool, await signedCall({ fields: { program } }));
    await held.call(1);
    const res = await postEvents(heldPool, await signedEvents({ fields: { program }, events: [{ type: "tool_finished", tool_call_id: "c1" }] }));
    expect(ToolEventsAccepted.parse(await res.json())).toEqual({ accepted: 0 });
    expect(metricValue(await metricsOf(heldPool), 'agentix_pool_tool_events_total{type="tool_finished",outcome="stale"}')).toBe(1);
    expect((await inspect(heldPool, program)).readiness.status).toBe("in-call");
    held.calls[1]?.release();
    expect((await second).status).toBe(200);
  });
});

describe("signals from the pool's own call lifecycle (a client that sends no events)", () => {
  const answer = (): FakeAnswer => ({
    usage: { prompt: 9_000, completion: 120, cached: 0 },
    toolCalls: [{ id: "call_x", name: "bash", arguments: JSON.stringify({ command: "sleep 2 && make test" }) }],
  });

  it("predicts from the answer's tool calls, feeds the cache ledger from its usage, and scores the gap", async () => {
    const { pool } = await setup(answer);
    const program = "prog_lifecycle1";
    expect((await postCall(pool, await signedCall({ fields: { program } }))).status).toBe(200);
    const after = await inspect(pool, program);
    expect(after).toMatchObject({ live_calls: 0, context_tokens: 9_120 });
    expect(after.readiness).toMatchObject({ status: "pending", source: "tool-arguments" });
    expect(after.readiness.ready_at! - after.readiness.made_at!).toBe(2_000);
    expect(after.cache_credit_tokens.e1).toBeGreaterThan(9_000);

    expect((await postCall(pool, await signedCall({ fields: { program } }))).status).toBe(200);
    const text = await metricsOf(pool);
    expect(metricValue(text, 'agentix_pool_readiness_arrivals{source="tool-arguments"}')).toBe(1);
    expect(metricValue(text, 'agentix_pool_readiness_predictions_total{source="tool-arguments"}')).toBe(2);
    expect(metricValue(text, 'agentix_pool_cache_observations_total{engine="e1",usage="reported"}')).toBe(2);
    // The second call reported 0 cached tokens against ~9,000 of predicted credit: the engine's retention drops.
    expect(metricValue(text, 'agentix_pool_engine_cache_retention{engine="e1"}')).toBeLessThan(1);
  });

  it("reads usage and tool calls from a stream as it passes", async () => {
    const { pool } = await setup(answer);
    const program = "prog_lifecycle2";
    const res = await postCall(pool, await signedCall({ fields: { program }, body: chatBody({ stream: true }) }));
    expect(res.status).toBe(200);
    const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    const events: string[] = [];
    for (let next = await reader.read(); !next.done; next = await reader.read()) events.push(next.value);
    expect(events.some((e) => e.includes('"tool_calls"'))).toBe(true);
    await waitFor(() => pool.dispatcher.runningCount === 0, "the stream's end");
    const after = await inspect(pool, program);
    expect(after).toMatchObject({ context_tokens: 9_120, readiness: { source: "tool-arguments" } });
  });

  it("answers 404 for a program it knows nothing of, 400 for a malformed ID", async () => {
    const { pool } = await setup();
    expect((await pool.app.request("/tao/programs/prog_unknown00001", { headers: operatorHeaders() })).status).toBe(404);
    expect((await pool.app.request("/tao/programs/nope", { headers: operatorHeaders() })).status).toBe(400);
  });
});
