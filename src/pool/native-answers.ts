import { isJsonObject, type JsonObject } from "../protocol/json.js";
import { eventObject, formatEvent, SseEventSplitter } from "../protocol/sse.js";

/*
 * A Responses answer an engine made natively, as the call's answer: the response's ID
 * is the pool's (protocol/response-ids.ts: it names the program and call, so a later
 * previous_response_id finds them), and `store` says what the client asked, since the
 * engine was told not to store (the edge keeps the conversation). Everything else is
 * the engine's. Only a 200 is changed; an error passes as it came.
 */

const encoder = new TextEncoder();

function asCall(response: JsonObject, responseId: string, store: boolean): JsonObject {
  return { ...response, id: responseId, store };
}

/** A stream event whose payload carries the response object (created, in_progress, completed, …), rewritten; others as they came. */
function eventAsCall(event: string, responseId: string, store: boolean): string {
  if (!event.includes('"response"')) return event;
  const payload = eventObject(event);
  if (payload === undefined || !isJsonObject(payload.response)) return event;
  const rewritten = { ...payload, response: asCall(payload.response, responseId, store) };
  const type = typeof payload.type === "string" ? `event: ${payload.type}\n` : "";
  return `${type}data: ${JSON.stringify(rewritten)}`;
}

export async function nativeResponsesAnswer(response: Response, responseId: string, store: boolean): Promise<Response> {
  if (response.status !== 200) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  if (!(headers.get("content-type") ?? "").includes("text/event-stream")) {
    const text = await response.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    // Not a response object: the edge reads it as it would any engine's (no usage, nothing stored).
    if (!isJsonObject(body)) return new Response(text, { status: 200, headers });
    return new Response(JSON.stringify(asCall(body, responseId, store)), { status: 200, headers });
  }
  if (response.body === null) return response;
  const body = response.body.pipeThrough(new SseEventSplitter()).pipeThrough(
    new TransformStream<string, Uint8Array>({
      transform(event, controller) {
        controller.enqueue(encoder.encode(formatEvent(eventAsCall(event, responseId, store))));
      },
    }),
  );
  return new Response(body, { status: 200, headers });
}
