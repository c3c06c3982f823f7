import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagesResponse, MessagesStreamEvent } from "../../src/protocol/messages.js";
import { ResponseObject, ResponseStreamEvent } from "../../src/protocol/responses.js";
import { eventData, SseEventSplitter } from "../../src/protocol/sse.js";
import { DEFAULT_SIM_MODEL, type SimEngineHandle, startSimEngine } from "../../src/sim/engine-server.js";

/*
 * Issue 12: the simulated engine serves Anthropic's Messages API and OpenAI's
 * Responses API, as vLLM does (generated as chat, answered in each API's shape, with
 * vLLM's differences: no null fields in a Messages answer, no cache_write_tokens).
 */

let engine: SimEngineHandle;

beforeAll(async () => {
  engine = await startSimEngine({ timeScale: 1_000 });
});
afterAll(async () => {
  await engine?.close();
});

const post = (path: string, body: unknown) =>
  fetch(`${engine.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

async function typedEvents(res: Response): Promise<unknown[]> {
  const out: unknown[] = [];
  const reader = res.body!.pipeThrough(new SseEventSplitter()).getReader();
  for (;;) {
    const next = await reader.read();
    if (next.done) return out;
    const data = eventData(next.value);
    if (data !== undefined && data !== "[DONE]") out.push(JSON.parse(data));
  }
}

describe("the simulated engine's other APIs", () => {
  it("answers /v1/messages in Anthropic's shape, whole and streamed", async () => {
    const body = { model: DEFAULT_SIM_MODEL, max_tokens: 5, system: "Be brief.", messages: [{ role: "user", content: "hi" }] };
    const raw = (await (await post("/v1/messages", body)).json()) as Record<string, unknown>;
    // vLLM dumps the answer without its nulls; with stop_sequence put back it is Anthropic's shape.
    expect(raw).not.toHaveProperty("stop_sequence");
    const whole = MessagesResponse.parse({ stop_sequence: null, ...raw });
    expect(whole).toMatchObject({ type: "message", stop_reason: "max_tokens", usage: { output_tokens: 5 } });
    const events = (await typedEvents(await post("/v1/messages", { ...body, stream: true }))).map((e) => MessagesStreamEvent.parse(e));
    expect(events[0]?.type).toBe("message_start");
    expect(events.at(-1)?.type).toBe("message_stop");
    expect(events.find((e) => e.type === "message_delta")).toMatchObject({ usage: { output_tokens: 5 } });
  });

  it("answers /v1/responses in the Responses shape, whole and streamed, and refuses previous_response_id", async () => {
    const body = { model: DEFAULT_SIM_MODEL, max_output_tokens: 4, instructions: "Be brief.", input: "hi" };
    const raw = (await (await post("/v1/responses", body)).json()) as { usage: { input_tokens_details: object } };
    expect(raw.usage.input_tokens_details).not.toHaveProperty("cache_write_tokens");
    const whole = ResponseObject.parse(raw);
    expect(whole).toMatchObject({ object: "response", status: "incomplete", usage: { output_tokens: 4 } });
    const events = (await typedEvents(await post("/v1/responses", { ...body, stream: true }))).map((e) => ResponseStreamEvent.parse(e));
    expect(events[0]?.type).toBe("response.created");
    expect(events.at(-1)?.type).toBe("response.incomplete");
    const refused = await post("/v1/responses", { ...body, previous_response_id: "resp_x" });
    expect(refused.status).toBe(400);
  });
});
