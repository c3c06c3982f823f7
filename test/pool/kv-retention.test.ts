import { afterEach, describe, expect, it } from "vitest";
import { KV_RETENTION_TAG_FIELD, MAX_KV_KEEP_MS } from "../../src/protocol/kv-retention.js";
import type { EngineConfig } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeEngine, type FakeEngineOptions, startFakeEngine } from "./fake-engine.js";
import { decodeStepMs } from "../../src/core/admission.js";
import { DEFAULT_RETENTION_SETTINGS } from "../../src/core/kv/retention-planner.js";
import { ChatCompletionRequest } from "../../src/protocol/chat.js";
import { estimatePromptTokens } from "../../src/protocol/tokens.js";
import { KV_LINKS, kvTransferMs } from "../../src/sim/kv-links.js";
import { decodeCostOf, ENGINE_PROFILES } from "../../src/sim/profiles.js";
import { chatBody, metricValue, operatorHeaders, signedCall, signedEvents, signedKvHints, testConfig, waitFor } from "./helpers.js";

/*
 * The pool's retention signals to engines (issue 13): each call's KV tagged with its
 * context, and the retention planner's keep / normal / drop hints POSTed to the engines
 * configured to take them, never affecting a call.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const PROGRAM = "prog_retention01";
const TOOL_ANSWER = { toolCalls: [{ id: "call_1", name: "bash", arguments: '{"cmd":"make test"}' }] };

async function setup(
  engineOptions: FakeEngineOptions,
  engine: Partial<Pick<EngineConfig, "retentionHints">> = { retentionHints: "agentix" },
): Promise<{ engine: FakeEngine; pool: PoolHandle }> {
  const fake = await startFakeEngine({ answer: () => TOOL_ANSWER, ...engineOptions });
  cleanups.push(() => fake.close());
  const pool = await startPool(testConfig({ engines: [{ id: "e1", url: fake.url, ...engine }] }));
  cleanups.push(() => pool.close());
  return { engine: fake, pool };
}

async function runCall(pool: PoolHandle, fields: { thread?: string; generation?: number } = {}): Promise<void> {
  const signed = await signedCall({ fields: { program: PROGRAM, ...fields }, body: chatBody() });
  const res = await pool.app.request("/v1/chat/completions", { method: "POST", headers: signed.headers, body: signed.body });
  expect(res.status).toBe(200);
  await res.text();
}

const hintsOf = (engine: FakeEngine) => engine.retentionBatches.flatMap((batch) => batch.hints);
const metricsOf = async (pool: PoolHandle) => (await pool.app.request("/metrics", { headers: operatorHeaders() })).text();
const hintSeries = (action: string, outcome: string) => `agentix_pool_kv_retention_hints_total{engine="e1",action="${action}",outcome="${outcome}"}`;

describe("KV retention signals: pool → engine", () => {
  it("tags each call's KV with its context and keeps it through the tool wait TAO predicts", async () => {
    const { engine, pool } = await setup({ retention: "takes" });
    await runCall(pool);
    expect(engine.calls[0]?.body[KV_RETENTION_TAG_FIELD]).toBe(`${PROGRAM}:main:0`);
    await waitFor(() => hintsOf(engine).length > 0, "a keep hint");
    const [keep] = hintsOf(engine);
    expect(keep).toMatchObject({ action: "keep", tag: `${PROGRAM}:main:0` });
    expect(keep?.action === "keep" && keep.keep_ms > 0 && keep.keep_ms <= MAX_KV_KEEP_MS).toBe(true);
    await waitFor(async () => metricValue(await metricsOf(pool), "agentix_pool_kv_retention_hints_applied_total{engine=\"e1\"}") === 1, "applied counted");
    expect(metricValue(await metricsOf(pool), hintSeries("keep", "sent"))).toBe(1);
    // The operator's view of the program shows the context, where it is held and the keep in force.
    const inspected = (await (await pool.app.request(`/tao/programs/${PROGRAM}`, { headers: operatorHeaders() })).json()) as { kv_contexts: unknown };
    expect(inspected.kv_contexts).toEqual([{ thread: "main", generation: 0, engines: ["e1"], kept_until: expect.any(Number) }]);
  });

  it("a tool event that moves the prediction keeps again for the new duration", async () => {
    const { engine, pool } = await setup({ retention: "takes" });
    await runCall(pool);
    await waitFor(() => hintsOf(engine).length === 1, "the first keep");
    const events = await signedEvents({ fields: { program: PROGRAM }, events: [{ type: "tool_started", tool: "bash", tool_call_id: "call_1", expected_duration_ms: 60_000 }] });
    expect((await pool.app.request("/v1/events", { method: "POST", headers: events.headers, body: events.body })).status).toBe(202);
    await waitFor(() => hintsOf(engine).length === 2, "the second keep");
    const second = hintsOf(engine)[1];
    expect(second).toMatchObject({ action: "keep", tag: `${PROGRAM}:main:0` });
    expect(second?.action === "keep" && second.keep_ms >= 60_000 - 1_000).toBe(true);
  });

  it("withdraws the keep when the context's next call runs, drops an older generation when a newer one comes, and every context at the program's end", async () => {
    const { engine, pool } = await setup({ retention: "takes" });
    await runCall(pool);
    await waitFor(() => hintsOf(engine).length === 1, "the keep");
    await runCall(pool);
    await waitFor(() => hintsOf(engine).some((h) => h.action === "normal"), "normal");
    await runCall(pool, { generation: 1 });
    await waitFor(() => hintsOf(engine).some((h) => h.action === "drop"), "the drop of generation 0");
    expect(engine.calls[2]?.body[KV_RETENTION_TAG_FIELD]).toBe(`${PROGRAM}:main:1`);
    const hints = await signedKvHints({ fields: { program: PROGRAM } });
    expect((await pool.app.request("/v1/kv-hints", { method: "POST", headers: hints.headers, body: hints.body })).status).toBe(202);
    await waitFor(() => hintsOf(engine).some((h) => h.action === "drop" && h.tag === `${PROGRAM}:main:1`), "the drop at the end");
    const actions = hintsOf(engine).map((h) => `${h.action} ${h.tag.slice(PROGRAM.length + 1)}`);
    expect(actions.filter((a) => !a.startsWith("keep"))).toEqual(["normal main:0", "drop main:0", "drop main:1"]);
    expect(metricValue(await metricsOf(pool), 'agentix_pool_kv_hints_total{type="program_ended"}')).toBe(1);
  });

  it("sends nothing to an engine configured without retention hints (the default) and counts its hints unsupported", async () => {
    const { engine, pool } = await setup({ retention: "takes" }, {});
    await runCall(pool);
    await waitFor(async () => metricValue(await metricsOf(pool), hintSeries("keep", "unsupported")) === 1, "the unsupported keep");
    expect(engine.calls[0]?.body).not.toHaveProperty(KV_RETENTION_TAG_FIELD);
    expect(engine.retentionBatches).toEqual([]);
  });

  it("an engine without the route (404) counts as unsupported, a failing one as failed, and calls are served all the same", async () => {
    const stock = await setup({});
    await runCall(stock.pool);
    await waitFor(async () => metricValue(await metricsOf(stock.pool), hintSeries("keep", "unsupported")) === 1, "unsupported after 404");
    const failing = await setup({ retention: "fails" });
    await runCall(failing.pool);
    await runCall(failing.pool);
    await waitFor(async () => (metricValue(await metricsOf(failing.pool), hintSeries("keep", "failed")) ?? 0) >= 1, "failed after 500");
    expect(failing.engine.calls).toHaveLength(2);
  });

  it("a disaggregated call's context is tagged on its prefill and its decode engine, and kept through the tool wait on the prefill engine only", async () => {
    const handoff = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [1], remote_engine_id: "p", remote_request_id: "r", remote_host: "10.0.0.1", remote_port: 5600, tp_size: 1 };
    const prefill = await startFakeEngine({ retention: "takes", answer: () => ({ usage: { prompt: 50, completion: 1 }, extra: { kv_transfer_params: handoff } }) });
    cleanups.push(() => prefill.close());
    const decode = await startFakeEngine({ retention: "takes", answer: () => TOOL_ANSWER });
    cleanups.push(() => decode.close());
    const pool = await startPool(
      testConfig({
        engines: [
          { id: "p1", url: prefill.url, role: "prefill", retentionHints: "agentix" },
          { id: "d1", url: decode.url, role: "decode", retentionHints: "agentix" },
        ],
      }),
    );
    cleanups.push(() => pool.close());
    await runCall(pool);
    const tag = `${PROGRAM}:main:0`;
    expect([prefill.calls[0]?.body[KV_RETENTION_TAG_FIELD], decode.calls[0]?.body[KV_RETENTION_TAG_FIELD]]).toEqual([tag, tag]);
    // The hand-off's keep, then the tool wait's, on the prefill engine; the tool wait's keeps went out together.
    await waitFor(() => hintsOf(prefill).length >= 2, "the prefill engine's keeps");
    expect(hintsOf(prefill).slice(0, 2)).toMatchObject([
      { action: "keep", tag },
      { action: "keep", tag },
    ]);
    // The next call is prefilled on a prefill engine: the decode copy is not kept (keepHandedOverCopies off).
    expect(hintsOf(decode).filter((hint) => hint.action === "keep")).toEqual([]);
  });
});

/*
 * A split call's prefill copy through its hand-off: the prefill engine freed it when its
 * one token was out, but the call's decode may recompute there and the program's next
 * call comes back there by its prefix, so the pool keeps it through the transfer and the
 * decode it expects (RetentionPlanner.prefillHandedOff, pool/handoff-estimate.ts).
 */
describe("KV retention signals: a split call's prefill copy kept through its hand-off", () => {
  const HANDOFF = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [1], remote_engine_id: "p", remote_request_id: "r", remote_host: "10.0.0.1", remote_port: 5600, tp_size: 1 };
  const PROFILE = "llama-3.1-8b-h100";
  const MAX_TOKENS = 20;
  const body = chatBody({ max_tokens: MAX_TOKENS });

  /** A vLLM prefill engine and a decode engine whose answer is held until the test releases it (the decode in progress). */
  async function splitPool(mode: EngineConfig["retentionHints"]): Promise<{ prefill: FakeEngine; decode: FakeEngine; pool: PoolHandle }> {
    const prefill = await startFakeEngine({ retention: "takes", answer: () => ({ usage: { prompt: 50, completion: 1 }, extra: { kv_transfer_params: HANDOFF } }) });
    cleanups.push(() => prefill.close());
    const decode = await startFakeEngine({ retention: "takes", behave: () => ({ kind: "json", hold: true }) });
    cleanups.push(() => decode.close());
    const pool = await startPool(
      testConfig({
        engines: [
          { id: "p1", url: prefill.url, role: "prefill", profile: PROFILE, retentionHints: mode },
          { id: "d1", url: decode.url, role: "decode", profile: PROFILE, retentionHints: mode },
        ],
      }),
    );
    cleanups.push(() => pool.close());
    return { prefill, decode, pool };
  }

  async function splitCall(setup: { decode: FakeEngine; pool: PoolHandle }, whileDecoding: () => Promise<void>): Promise<void> {
    const signed = await signedCall({ fields: { program: PROGRAM }, body });
    const answer = setup.pool.app.request("/v1/chat/completions", { method: "POST", headers: signed.headers, body: signed.body });
    const decoding = await setup.decode.call(0);
    await whileDecoding();
    decoding.release();
    const res = await answer;
    expect(res.status).toBe(200);
    await res.text();
  }

  it("the prefill engine is told to keep the call's context for handoffKeepFactor × the expected transfer and decode, before the decode ends", async () => {
    const setup = await splitPool("agentix");
    await splitCall(setup, () => waitFor(() => hintsOf(setup.prefill).length > 0, "the hand-off keep"));
    // What the pool expects, from the profile's figures: the prompt's KV over the prefill engine's NVLink, then
    // max_tokens decode steps of one sequence holding the prompt and its output (admission's expectation, capped by max_tokens).
    const promptTokens = estimatePromptTokens(ChatCompletionRequest.parse(body));
    const expectedMs =
      kvTransferMs(KV_LINKS[PROFILE], promptTokens, "engine") + MAX_TOKENS * decodeStepMs(decodeCostOf(ENGINE_PROFILES[PROFILE]), 1, promptTokens + MAX_TOKENS);
    const keepMs = Math.ceil(DEFAULT_RETENTION_SETTINGS.handoffKeepFactor * expectedMs);
    expect(keepMs).toBeGreaterThan(1.5 * MAX_TOKENS * 7);
    expect(hintsOf(setup.prefill)).toEqual([{ action: "keep", tag: `${PROGRAM}:main:0`, keep_ms: keepMs }]);
    // The decode engine is told nothing at the hand-off: its copy is in use.
    expect(hintsOf(setup.decode)).toEqual([]);
  });

  it("SGLang's bootstrap split: the prefill engine is kept through the same expected transfer and decode once both legs run", async () => {
    const streamed = (call: { body: Record<string, unknown> }) => (call.body.stream === true ? ({ kind: "stream" } as const) : ({ kind: "json" } as const));
    const prefill = await startFakeEngine({ retention: "takes", behave: streamed, answer: () => ({ usage: { prompt: 50, completion: 1 } }) });
    cleanups.push(() => prefill.close());
    const decode = await startFakeEngine({ retention: "takes", behave: streamed });
    cleanups.push(() => decode.close());
    const pool = await startPool(
      testConfig({
        engines: [
          { id: "p1", url: prefill.url, kind: "sglang", role: "prefill", profile: PROFILE, retentionHints: "agentix" },
          { id: "d1", url: decode.url, kind: "sglang", role: "decode", profile: PROFILE, retentionHints: "agentix" },
        ],
      }),
    );
    cleanups.push(() => pool.close());
    const streamBody = chatBody({ max_tokens: MAX_TOKENS, stream: true });
    const signed = await signedCall({ fields: { program: PROGRAM }, body: streamBody });
    const answer = pool.app.request("/v1/chat/completions", { method: "POST", headers: signed.headers, body: signed.body });
    const [prefillCall, decodeCall] = await Promise.all([prefill.call(0), decode.call(0)]);
    await waitFor(() => hintsOf(prefill).length > 0, "the hand-off keep");
    prefillCall.release();
    decodeCall.release();
    await (await answer).text();
    const promptTokens = estimatePromptTokens(ChatCompletionRequest.parse(streamBody));
    const expectedMs =
      kvTransferMs(KV_LINKS[PROFILE], promptTokens, "engine") + MAX_TOKENS * decodeStepMs(decodeCostOf(ENGINE_PROFILES[PROFILE]), 1, promptTokens + MAX_TOKENS);
    expect(hintsOf(prefill)[0]).toEqual({ action: "keep", tag: `${PROGRAM}:main:0`, keep_ms: Math.ceil(DEFAULT_RETENTION_SETTINGS.handoffKeepFactor * expectedMs) });
  });

  it("sends no hand-off keep to engines configured without retention hints (it is counted unsupported)", async () => {
    const setup = await splitPool("none");
    await splitCall(setup, () =>
      waitFor(async () => metricValue(await metricsOf(setup.pool), 'agentix_pool_kv_retention_hints_total{engine="p1",action="keep",outcome="unsupported"}') === 1, "the unsupported keep"),
    );
    expect(setup.prefill.retentionBatches).toEqual([]);
    expect(setup.decode.retentionBatches).toEqual([]);
    expect(setup.prefill.calls[0]?.body).not.toHaveProperty(KV_RETENTION_TAG_FIELD);
  });
});
