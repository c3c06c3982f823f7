import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseResponseId } from "../../src/protocol/response-ids.js";
import { ResponseObject, ResponseStreamEvent } from "../../src/protocol/responses.js";
import { POOL_PATHS } from "../../src/protocol/signing.js";
import { eventData, SseEventSplitter } from "../../src/protocol/sse.js";
import { parseStatsEvent, statsFromHeaders } from "../../src/protocol/stats.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";
import { signedCall, testConfig } from "./helpers.js";

/*
 * Issue 12: OpenAI's Responses API at the pool: a chat completion to the engine, the
 * answer in the Responses shape, its ID naming the call's program and call.
 */

let engine: SimEngineHandle;
let pool: PoolHandle;

beforeAll(async () => {
  engine = await startSimEngine({ timeScale: 1_000 });
  pool = await startPool(testConfig({ engines: [{ id: "sim-r", url: engine.url }], models: [DEFAULT_SIM_MODEL] }));
});
afterAll(async () => {
  await pool?.close();
  await engine?.close();
});

async function respond(body: Record<string, unknown>) {
  const call = await signedCall({
    path: POOL_PATHS.responses,
    fields: { program: "prog_respprogram01" },
    body: { model: DEFAULT_SIM_MODEL, max_output_tokens: 5, instructions: "Be terse.", input: "List the files.", ...body },
  });
  const res = await fetch(`${pool.url}${POOL_PATHS.responses}`, { method: "POST", headers: call.headers, body: call.body });
  return { res, callId: call.fields.call };
}

describe("POST /v1/responses at the pool", () => {
  it("answers a response whose ID names the program and the call, with the engine's usage and the pool's stats", async () => {
    const { res, callId } = await respond({});
    expect(res.status).toBe(200);
    const body = ResponseObject.parse(await res.json());
    expect(parseResponseId(body.id)).toEqual({ programId: "prog_respprogram01", callId });
    expect(body).toMatchObject({ object: "response", status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
    expect(body.output[0]).toMatchObject({ type: "message", role: "assistant" });
    expect(body.usage?.output_tokens).toBe(5);
    expect(statsFromHeaders(res.headers)).toMatchObject({ engine: "sim-r" });
  });

  it("streams the typed events, numbered, ending in response.incomplete with usage", async () => {
    const { res, callId } = await respond({ stream: true });
    expect(res.status).toBe(200);
    const raw: string[] = [];
    const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
    for (;;) {
      const next = await reader.read();
      if (next.done) break;
      raw.push(next.value);
    }
    const events = raw.filter((e) => eventData(e) !== undefined).map((e) => ResponseStreamEvent.parse(JSON.parse(eventData(e)!)));
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[0]?.type).toBe("response.created");
    const last = events.at(-1);
    expect(last?.type).toBe("response.incomplete");
    if (last?.type !== "response.incomplete") return;
    expect(parseResponseId(last.response.id)).toEqual({ programId: "prog_respprogram01", callId });
    expect(last.response.usage?.output_tokens).toBe(5);
    expect(events.filter((e) => e.type === "response.output_text.delta").length).toBeGreaterThan(0);
    expect(raw.some((e) => parseStatsEvent(e)?.engine === "sim-r")).toBe(true);
  });
});
