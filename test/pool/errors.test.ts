import { afterEach, beforeEach, describe, expect, it, type MockInstance, vi } from "vitest";
import { eventData, SseEventSplitter } from "../../src/protocol/sse.js";
import { CALL_ERROR_MESSAGES, PoolCallErrorBody, redactEngineMessage } from "../../src/pool/call-errors.js";
import type { PoolConfigInput } from "../../src/pool/config.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { type FakeBehavior, type FakeEngine, refusedUrl, startFakeEngine } from "./fake-engine.js";
import { chatBody, type SignedCall, signedCall, testConfig } from "./helpers.js";

/*
 * What a tenant reads of the pool's failures: fixed messages with the call's ID, never
 * an engine's ID, address, errno or own words, which go to the pool's log instead.
 */

type EngineInput = PoolConfigInput["engines"][number];

const cleanups: (() => Promise<void>)[] = [];
let errorLog: MockInstance<typeof console.error>;
let warnLog: MockInstance<typeof console.warn>;
beforeEach(() => {
  errorLog = vi.spyOn(console, "error").mockImplementation(() => undefined);
  warnLog = vi.spyOn(console, "warn").mockImplementation(() => undefined);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  vi.restoreAllMocks();
});

/** An engine id a message could not contain by chance. */
const ENGINE_ID = "gpu-rack7-secret";
/** Text an engine might write that a tenant must never see. */
const ENGINE_SECRET_TEXT = "CUDA OOM on worker http://10.20.30.40:8000/v1 (model /srv/models/llama-70b/weights) errno ECONNRESET";

async function fakeEngine(behave: (index: number) => FakeBehavior): Promise<FakeEngine> {
  const engine = await startFakeEngine({ behave: (call) => behave(call.index) });
  cleanups.push(() => engine.close());
  return engine;
}

async function pool(engines: EngineInput[], extra: Partial<PoolConfigInput> = {}): Promise<PoolHandle> {
  const handle = await startPool(testConfig({ engines, ...extra }));
  cleanups.push(() => handle.close());
  return handle;
}

const send = (p: PoolHandle, call: SignedCall) =>
  fetch(`${p.url}/v1/chat/completions`, { method: "POST", headers: call.headers, body: call.body });

const logged = (spy: MockInstance<(...args: unknown[]) => void>) => spy.mock.calls.map((args) => args.map(String).join(" ")).join("\n");

/** Nothing of the engine in what the tenant reads. */
function expectNoEngineDetail(text: string, engineUrl?: string): void {
  for (const secret of [ENGINE_ID, "10.20.30.40", "/srv/models", "ECONNREFUSED", "ECONNRESET", "CUDA", "127.0.0.1"]) expect(text).not.toContain(secret);
  if (engineUrl !== undefined) expect(text).not.toContain(new URL(engineUrl).port);
}

describe("error bodies a tenant may read (real sockets)", () => {
  it("answers 502 engine_unavailable with a fixed message and the call's ID when the engine refuses the connection; errno and address go to the log", async () => {
    const url = await refusedUrl();
    const p = await pool([{ id: ENGINE_ID, url }], { retries: 0, metricsIntervalMs: 60_000 });
    const call = await signedCall();
    const res = await send(p, call);
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(PoolCallErrorBody.parse(JSON.parse(text)).error).toEqual({
      message: CALL_ERROR_MESSAGES.engine_unavailable,
      type: "server_error",
      code: "engine_unavailable",
      param: null,
      request_id: call.fields.call,
    });
    expectNoEngineDetail(text, url);
    const log = logged(errorLog) + logged(warnLog);
    expect(log).toContain(call.fields.call);
    expect(log).toContain(ENGINE_ID);
    expect(log).toContain("ECONNREFUSED");
  });

  it("keeps an engine's 5xx text out of the answer, and in the log", async () => {
    const engine = await fakeEngine(() => ({ kind: "status", status: 500, body: JSON.stringify({ error: { message: ENGINE_SECRET_TEXT } }) }));
    const p = await pool([{ id: ENGINE_ID, url: engine.url }], { retries: 1 });
    const call = await signedCall();
    const res = await send(p, call);
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(PoolCallErrorBody.parse(JSON.parse(text)).error).toMatchObject({ code: "engine_unavailable", request_id: call.fields.call });
    expectNoEngineDetail(text, engine.url);
    expect(engine.calls).toHaveLength(2);
    expect(logged(errorLog)).toContain(ENGINE_SECRET_TEXT);
  });

  it("answers 502 engine_response_error when a JSON answer breaks off, without the engine's details", async () => {
    const engine = await fakeEngine(() => ({ kind: "broken-json" }));
    const p = await pool([{ id: ENGINE_ID, url: engine.url }]);
    const call = await signedCall();
    const res = await send(p, call);
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(PoolCallErrorBody.parse(JSON.parse(text)).error).toMatchObject({
      message: CALL_ERROR_MESSAGES.engine_response_error,
      code: "engine_response_error",
      request_id: call.fields.call,
    });
    expectNoEngineDetail(text, engine.url);
    expect(logged(errorLog)).toMatch(new RegExp(`${call.fields.call}.*${ENGINE_ID}`));
  });

  it("ends a broken stream with a fixed error event naming the call, nothing of the engine", async () => {
    const engine = await fakeEngine(() => ({ kind: "stream", breakAfterFirst: true }));
    const p = await pool([{ id: ENGINE_ID, url: engine.url }]);
    const call = await signedCall({ body: chatBody({ stream: true }) });
    const res = await send(p, call);
    const events = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    expect((await events.read()).value).toContain('"Hel"');
    engine.calls[0]?.release();
    const rest: string[] = [];
    for (let next = await events.read(); !next.done; next = await events.read()) rest.push(next.value);
    const errorEvent = eventData(rest[0] ?? "") ?? "";
    expect(PoolCallErrorBody.parse(JSON.parse(errorEvent)).error).toEqual({
      message: `${CALL_ERROR_MESSAGES.engine_stream_error} (request ${call.fields.call})`,
      type: "server_error",
      code: "engine_stream_error",
      param: null,
      request_id: call.fields.call,
    });
    expectNoEngineDetail(errorEvent, engine.url);
    expect(logged(errorLog)).toMatch(new RegExp(`${call.fields.call}.*${ENGINE_ID}`));
  });

  it("keeps an engine's 4xx message about the request, with its status and code, addresses and paths taken out and capped", async () => {
    // vLLM's older error shape.
    const vllm400 = JSON.stringify({
      object: "error",
      message: `This model's maximum context length is 8192 tokens. However, you requested 9000 tokens. Served by http://10.20.30.40:8000 from /srv/models/llama-70b/config.json. ${"More. ".repeat(100)}`,
      type: "BadRequestError",
      param: "max_tokens",
      code: "context_length_exceeded",
    });
    const engine = await fakeEngine(() => ({ kind: "status", status: 400, body: vllm400 }));
    const other = await fakeEngine(() => ({ kind: "json" }));
    const p = await pool([
      { id: `a-${ENGINE_ID}`, url: engine.url },
      { id: "b-other", url: other.url },
    ]);
    const call = await signedCall();
    const res = await send(p, call);
    expect(res.status).toBe(400);
    const text = await res.text();
    const { error } = PoolCallErrorBody.parse(JSON.parse(text));
    expect(error).toMatchObject({ type: "invalid_request_error", code: "context_length_exceeded", param: "max_tokens", request_id: call.fields.call });
    expect(error.message).toMatch(/^This model's maximum context length is 8192 tokens\. However, you requested 9000 tokens\. Served by \[redacted\] from \[redacted\] More\./);
    expect(error.message.length).toBeLessThanOrEqual(300);
    expectNoEngineDetail(text, engine.url);
    // The request's own fault: not retried elsewhere.
    expect(other.calls).toHaveLength(0);
    expect(logged(warnLog)).toContain("/srv/models/llama-70b/config.json");
  });

  it("gives a fixed message for an engine 4xx whose body is not JSON (a proxy's page)", async () => {
    const engine = await fakeEngine(() => ({ kind: "status", status: 404, body: "<html>nginx at 10.20.30.40</html>" }));
    const p = await pool([{ id: ENGINE_ID, url: engine.url }]);
    const call = await signedCall();
    const res = await send(p, call);
    expect(res.status).toBe(404);
    expect(PoolCallErrorBody.parse(await res.json()).error).toMatchObject({
      message: CALL_ERROR_MESSAGES.engine_rejected_request,
      code: null,
      request_id: call.fields.call,
    });
  });

  it("treats an engine's 401 or 429 as the pool's problem: retried on another engine, never relayed", async () => {
    for (const status of [401, 429]) {
      const refusing = await fakeEngine(() => ({ kind: "status", status, body: JSON.stringify({ error: { message: `Incorrect API key sk-abc for org-secret at ${ENGINE_SECRET_TEXT}` } }) }));
      const good = await fakeEngine(() => ({ kind: "json" }));
      const p = await pool([
        { id: "a-refusing", url: refusing.url },
        { id: "b-good", url: good.url },
      ]);
      const res = await send(p, await signedCall());
      expect(res.status).toBe(200);
      expect(refusing.calls).toHaveLength(1);
      expect(good.calls).toHaveLength(1);

      const alone = await pool([{ id: ENGINE_ID, url: refusing.url }], { retries: 0 });
      const call = await signedCall();
      const refused = await send(alone, call);
      expect(refused.status).toBe(502);
      const text = await refused.text();
      expect(PoolCallErrorBody.parse(JSON.parse(text)).error).toMatchObject({ code: "engine_unavailable", request_id: call.fields.call });
      expect(text).not.toContain("sk-abc");
      expect(text).not.toContain("org-secret");
    }
  });
});

describe("redaction of an engine's message", () => {
  it.each([
    ["see https://engine.internal:8443/v1/models?x=1 for more", "see [redacted] for more"],
    ["worker 192.168.1.20:8000 said no", "worker [redacted] said no"],
    ["worker 10.0.0.5 said no", "worker [redacted] said no"],
    ["peer [fe80::1%eth0]:9000 gone", "peer [redacted] gone"],
    ["peer [2001:db8::7]:9000 gone", "peer [redacted] gone"],
    ["bound to fe80:0:0:0:0:0:0:1 only", "bound to [redacted] only"],
    ["host gpu-3.cluster.local:30000 busy", "host [redacted] busy"],
    ["at localhost:8000 now", "at [redacted] now"],
    ["The model `/mnt/models/Llama-3.1-8B` does not exist.", "The model `[redacted]` does not exist."],
    ["max_tokens must be at most 4096: got 9000", "max_tokens must be at most 4096: got 9000"],
    ["This model's maximum context length is 8192 tokens.", "This model's maximum context length is 8192 tokens."],
  ])("%j -> %j", (input, expected) => {
    expect(redactEngineMessage(input)).toBe(expected);
  });

  it("caps the message at 300 characters", () => {
    const out = redactEngineMessage("word ".repeat(1_000));
    expect(out.length).toBe(300);
    expect(out.endsWith("…")).toBe(true);
  });
});
