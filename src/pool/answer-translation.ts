import { ChatCompletion } from "../protocol/chat.js";
import { formatMessagesEvent } from "../protocol/messages.js";
import { eventData, formatEvent, isDoneEvent, SseEventSplitter } from "../protocol/sse.js";
import { parseStatsEvent } from "../protocol/stats.js";
import { ChatToMessagesStream, chatCompletionToMessage } from "../protocol/translate/messages-chat.js";

/*
 * A call whose API the engine is not asked to serve natively went to the engine as a
 * chat completion; its answer goes back in the client's API. Only a 200 is translated:
 * errors stay OpenAI-shaped (the edge words them in the client's API). The pool's
 * stats (headers, or the stats comment of a stream) pass through unchanged, and the
 * pool read the engine's usage from the chat answer before this, so metering and
 * service accounting are the same as for chat calls.
 */

const encoder = new TextEncoder();

/** A chat answer (JSON or SSE) as an Anthropic Messages answer. */
export async function messagesAnswerFromChat(response: Response, inputTokens: number): Promise<Response> {
  if (response.status !== 200) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  if (!(headers.get("content-type") ?? "").includes("text/event-stream")) {
    const completion = ChatCompletion.safeParse(await response.json().catch(() => undefined));
    if (!completion.success) return response;
    headers.set("content-type", "application/json");
    return new Response(JSON.stringify(chatCompletionToMessage(completion.data)), { status: 200, headers });
  }
  if (response.body === null) return response;
  const translator = new ChatToMessagesStream({ inputTokens });
  const emit = (controller: TransformStreamDefaultController<Uint8Array>, events: ReturnType<ChatToMessagesStream["finish"]>) => {
    for (const event of events) controller.enqueue(encoder.encode(formatMessagesEvent(event)));
  };
  const body = response.body.pipeThrough(new SseEventSplitter()).pipeThrough(
    new TransformStream<string, Uint8Array>({
      transform(event, controller) {
        if (parseStatsEvent(event)) {
          controller.enqueue(encoder.encode(formatEvent(event)));
          return;
        }
        if (isDoneEvent(event)) return emit(controller, translator.finish());
        const data = eventData(event);
        if (data === undefined) return;
        let payload: unknown;
        try {
          payload = JSON.parse(data);
        } catch {
          return;
        }
        emit(controller, translator.push(payload));
      },
      flush(controller) {
        emit(controller, translator.finish());
      },
    }),
  );
  return new Response(body, { status: 200, headers });
}
