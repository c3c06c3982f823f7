import { isJsonObject, type JsonObject } from "../protocol/json.js";
import { eventObject, formatEvent, SseEventSplitter } from "../protocol/sse.js";

/*
 * The simulated engine answers /v1/messages and /v1/responses through the pool's own
 * chat translation; these are the ways vLLM's native answers differ from it, applied
 * so that the edge and pool meet what a real engine writes, not only their own shape:
 * vLLM's Messages router dumps its models with `exclude_none` (no `stop_sequence:
 * null`), and its Responses usage has no `cache_write_tokens`.
 */

const encoder = new TextEncoder();

function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (!isJsonObject(value)) return value;
  return Object.fromEntries(Object.entries(value).flatMap(([key, inner]) => (inner === null ? [] : [[key, withoutNulls(inner)]])));
}

function withoutCacheWrites(response: JsonObject): JsonObject {
  const usage = response.usage;
  if (!isJsonObject(usage) || !isJsonObject(usage.input_tokens_details)) return response;
  const { cache_write_tokens: _unreported, ...details } = usage.input_tokens_details;
  return { ...response, usage: { ...usage, input_tokens_details: details } };
}

export type DialectRewrite = (payload: JsonObject) => JsonObject;

/** vLLM's Messages JSON (streams keep their nulls: vLLM writes events with model_dump_json). */
export const vllmMessages: { json: DialectRewrite } = { json: (payload) => withoutNulls(payload) as JsonObject };

/** vLLM's Responses usage, in the whole response and in the events that carry it. */
export const vllmResponses: { json: DialectRewrite; event: DialectRewrite } = {
  json: withoutCacheWrites,
  event: (payload) => (isJsonObject(payload.response) ? { ...payload, response: withoutCacheWrites(payload.response) } : payload),
};

/** A 200 answer, JSON or SSE, with `rewrite` applied to its JSON (to each event's payload when `event` is given). */
export async function inDialect(response: Response, rewrite: { json: DialectRewrite; event?: DialectRewrite }): Promise<Response> {
  if (response.status !== 200) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  if (!(headers.get("content-type") ?? "").includes("text/event-stream")) {
    const body: unknown = await response.json();
    return new Response(JSON.stringify(isJsonObject(body) ? rewrite.json(body) : body), { status: 200, headers });
  }
  const event = rewrite.event;
  if (event === undefined || response.body === null) return response;
  const body = response.body.pipeThrough(new SseEventSplitter()).pipeThrough(
    new TransformStream<string, Uint8Array>({
      transform(text, controller) {
        const payload = text.includes('"usage"') ? eventObject(text) : undefined;
        if (payload === undefined) return controller.enqueue(encoder.encode(formatEvent(text)));
        const type = typeof payload.type === "string" ? `event: ${payload.type}\n` : "";
        controller.enqueue(encoder.encode(formatEvent(`${type}data: ${JSON.stringify(event(payload))}`)));
      },
    }),
  );
  return new Response(body, { status: 200, headers });
}
