import { ChatCompletion } from "../chat.js";
import { isJsonObject } from "../json.js";
import { formatMessagesEvent } from "../messages.js";
import { eventData, formatEvent, isDoneEvent, SseEventSplitter } from "../sse.js";
import { parseStatsEvent } from "../stats.js";
import { formatResponsesEvent, type ResponsesRequest } from "../responses.js";
import { ChatToMessagesStream, chatCompletionToMessage } from "./messages-chat.js";
import { ChatToResponsesStream, chatCompletionToResponse } from "./responses-chat.js";

/*
 * A call whose API the engine is not asked to serve natively went to the engine as a
 * chat completion; its answer goes back in the client's API. Only a 200 is translated:
 * errors stay OpenAI-shaped (the edge words them in the client's API). The pool's
 * stats (headers, or the stats comment of a stream) pass through unchanged, and the
 * pool read the engine's usage from the chat answer before this, so metering and
 * service accounting are the same as for chat calls.
 */

const encoder = new TextEncoder();

/** A stream translator: chat chunks in, the API's events (already formatted) out. */
interface StreamTranslator {
  push(payload: unknown): string[];
  finish(): string[];
}

/** How one API's answer is made from a chat answer. */
interface AnswerTranslation {
  json(completion: ChatCompletion): unknown;
  stream(): StreamTranslator;
  /** The chat ID the translation derives its own IDs from (a chunk's `id` is replaced by it). */
  chatId?: string;
}

async function answerFromChat(response: Response, translation: AnswerTranslation): Promise<Response> {
  if (response.status !== 200) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  const withId = (payload: unknown) =>
    translation.chatId !== undefined && isJsonObject(payload) ? { ...payload, id: translation.chatId } : payload;
  if (!(headers.get("content-type") ?? "").includes("text/event-stream")) {
    const completion = ChatCompletion.safeParse(withId(await response.json().catch(() => undefined)));
    if (!completion.success) return response;
    headers.set("content-type", "application/json");
    return new Response(JSON.stringify(translation.json(completion.data)), { status: 200, headers });
  }
  if (response.body === null) return response;
  const translator = translation.stream();
  const emit = (controller: TransformStreamDefaultController<Uint8Array>, events: string[]) => {
    for (const event of events) controller.enqueue(encoder.encode(event));
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
        emit(controller, translator.push(withId(payload)));
      },
      flush(controller) {
        emit(controller, translator.finish());
      },
    }),
  );
  return new Response(body, { status: 200, headers });
}

/** A chat answer (JSON or SSE) as an Anthropic Messages answer. */
export function messagesAnswerFromChat(response: Response, inputTokens: number): Promise<Response> {
  return answerFromChat(response, {
    json: chatCompletionToMessage,
    stream: () => {
      const translator = new ChatToMessagesStream({ inputTokens });
      return {
        push: (payload) => translator.push(payload).map(formatMessagesEvent),
        finish: () => translator.finish().map(formatMessagesEvent),
      };
    },
  });
}

/** A chat answer (JSON or SSE) as a Responses API answer whose ID is `responseId`. */
export function responsesAnswerFromChat(response: Response, request: ResponsesRequest, responseId: string): Promise<Response> {
  return answerFromChat(response, {
    chatId: `chatcmpl-${responseId.replace(/^resp_/, "")}`,
    json: (completion) => chatCompletionToResponse(completion, request),
    stream: () => {
      const translator = new ChatToResponsesStream(request);
      return {
        push: (payload) => translator.push(payload).map(formatResponsesEvent),
        finish: () => translator.finish().map(formatResponsesEvent),
      };
    },
  });
}
