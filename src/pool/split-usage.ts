import { dataEvent, eventObject, formatEvent, SseEventSplitter } from "../protocol/sse.js";
import type { CallUsage } from "./call-facts.js";

/*
 * A split call's answer comes from its decode engine, whose usage counts the prompt as
 * it ran there: nearly all of it cached, since it arrived as KV. The tenant is billed
 * for the prompt as the prefill engine ran it (what it computed, what its own prefix
 * cache held) and for the output as the decode engine made it, so the answer's usage
 * (every chunk that carries one, and a whole answer's) gets the prefill's prompt figures.
 *
 * SGLang's decode engine does not count the prompt as the prefill did either: what it
 * reports as cached_tokens is the prefill's prefix hit as carried in the KV metadata
 * plus its own prefix reuse beyond what the prefill counted, with arithmetic that has
 * changed between versions (python/sglang/srt/disaggregation/decode.py
 * `_commit_transfer_to_req`, decode_schedule_batch_mixin.py
 * `prepare_for_prebuilt_extend`); the prefill server's own answer (read to its end by
 * its proxy, mini_lb.py) has the prompt as it was computed, so that is what is billed.
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

/**
 * The prefill's prompt usage as the rewrite reads it: known (vLLM: the prefill answered
 * first), or still to come (SGLang: the prefill runs alongside the decode and ends
 * before its last chunk, so it is awaited there); undefined: the decode's usage stands.
 */
export type PrefillPrompt = CallUsage | Promise<CallUsage | undefined>;

/** The decode engine's answer (JSON or a chat/completions event stream) with the prefill's prompt usage. */
export function billPromptFromPrefill(response: Response, prefillPrompt: PrefillPrompt): Response {
  if (!response.ok || response.body === null) return response;
  const promptOf = async (): Promise<CallUsage | undefined> => prefillPrompt;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  if ((headers.get("content-type") ?? "").includes("text/event-stream")) {
    const encoder = new TextEncoder();
    const rewrite = new TransformStream<string, Uint8Array>({
      async transform(event, controller) {
        const object = event.includes('"usage"') ? eventObject(event) : undefined;
        const prompt = object !== undefined && isRecord(object.usage) ? await promptOf() : undefined;
        const rewritten = object !== undefined && prompt !== undefined ? dataEvent({ ...object, usage: withPrefillPrompt(object.usage, prompt) }) : formatEvent(event);
        controller.enqueue(encoder.encode(rewritten));
      },
    });
    return new Response(response.body.pipeThrough(new SseEventSplitter()).pipeThrough(rewrite), { status: response.status, headers });
  }
  const body = Promise.all([response.text(), promptOf()]).then(([text, prompt]) => {
    if (prompt === undefined) return text;
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

/** A prefill prompt still to come: settled by its leg's end, or undefined once `waitMs` pass without one (the decode's usage then stands). */
export function pendingPrefillPrompt(waitMs: number): { prompt: Promise<CallUsage | undefined>; settle(usage: CallUsage | undefined): void } {
  let settle!: (usage: CallUsage | undefined) => void;
  const prompt = new Promise<CallUsage | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), waitMs);
    // A pending wait must not keep a closing pool's process alive.
    timer.unref();
    settle = (usage) => {
      clearTimeout(timer);
      resolve(usage);
    };
  });
  return { prompt, settle };
}
