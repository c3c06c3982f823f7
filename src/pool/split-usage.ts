import { dataEvent, eventObject, formatEvent, SseEventSplitter } from "../protocol/sse.js";
import type { CallUsage } from "./call-facts.js";

/*
 * A split call's answer comes from its decode engine, whose usage counts the prompt as
 * it ran there: nearly all of it cached, since it arrived as KV. The tenant is billed
 * for the prompt as the prefill engine ran it (what it computed, what its own prefix
 * cache held) and for the output as the decode engine made it, so the answer's usage
 * (every chunk that carries one, and a whole answer's) gets the prefill's prompt figures.
 */

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** An OpenAI usage object with the prompt figures of `prompt`; unchanged when it is not one. */
export function withPrefillPrompt(usage: unknown, prompt: CallUsage): unknown {
  if (!isRecord(usage) || typeof usage.completion_tokens !== "number") return usage;
  const details = isRecord(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  return {
    ...usage,
    prompt_tokens: prompt.promptTokens,
    total_tokens: prompt.promptTokens + usage.completion_tokens,
    prompt_tokens_details: { ...details, cached_tokens: prompt.cachedTokens },
  };
}

/** The decode engine's answer (JSON or a chat/completions event stream) with the prefill's prompt usage. */
export function billPromptFromPrefill(response: Response, prompt: CallUsage): Response {
  if (!response.ok || response.body === null) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  if ((headers.get("content-type") ?? "").includes("text/event-stream")) {
    const encoder = new TextEncoder();
    const rewrite = new TransformStream<string, Uint8Array>({
      transform(event, controller) {
        const object = event.includes('"usage"') ? eventObject(event) : undefined;
        const rewritten = object !== undefined && isRecord(object.usage) ? dataEvent({ ...object, usage: withPrefillPrompt(object.usage, prompt) }) : formatEvent(event);
        controller.enqueue(encoder.encode(rewritten));
      },
    });
    return new Response(response.body.pipeThrough(new SseEventSplitter()).pipeThrough(rewrite), { status: response.status, headers });
  }
  const body = response.text().then((text) => {
    try {
      const answer: unknown = JSON.parse(text);
      return isRecord(answer) && "usage" in answer ? JSON.stringify({ ...answer, usage: withPrefillPrompt(answer.usage, prompt) }) : text;
    } catch {
      return text;
    }
  });
  return new Response(
    new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(new TextEncoder().encode(await body));
        controller.close();
      },
    }),
    { status: response.status, headers },
  );
}
