import type { Usage } from "../../protocol/chat.js";
import type { OpenAIErrorBody } from "../../protocol/errors.js";
import { formatResponsesEvent, type ResponseObject, ResponseUsage } from "../../protocol/responses.js";
import { isJsonObject } from "../../protocol/json.js";
import { eventObject } from "../../protocol/sse.js";
import { type PoolCallStats, parseStatsEvent } from "../../protocol/stats.js";
import type { StreamRelayFilter } from "./sse-filter.js";

/** The Responses API's usage in chat's terms (both count cached tokens inside the input). */
export function chatUsageOfResponse(usage: ResponseUsage): Usage {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
    prompt_tokens_details: { cached_tokens: usage.input_tokens_details.cached_tokens },
  };
}


/** Events that end a response the client may use; response.failed is an end, not a proper one. */
const FINISHED = new Set(["response.completed", "response.incomplete"]);

/**
 * A Responses API stream on its way to the client: everything passes but the pool's
 * stats comment. The usage, and the finished response (to store for a later
 * previous_response_id), come with response.completed or response.incomplete; delta
 * events count as output chunks, the estimate for a stream cut before them.
 */
export class ResponsesStreamFilter implements StreamRelayFilter {
  usage: Usage | undefined;
  readonly partialUsage: Usage | undefined = undefined;
  stats: PoolCallStats | undefined;
  outputChunks = 0;
  sawDone = false;
  /** The finished response, as its last event carried it. */
  answer: ResponseObject | undefined;

  #lastSequence = -1;

  /** The Responses stream's `error` event, numbered after the last event relayed. */
  errorEvent(error: OpenAIErrorBody): string {
    return formatResponsesEvent({
      type: "error",
      sequence_number: this.#lastSequence + 1,
      code: error.error.code,
      message: error.error.message,
      param: error.error.param,
    });
  }

  pass(event: string): string | undefined {
    const stats = parseStatsEvent(event);
    if (stats) {
      this.stats = stats;
      return undefined;
    }
    const payload = eventObject(event);
    if (payload === undefined || typeof payload.type !== "string") return event;
    if (typeof payload.sequence_number === "number") this.#lastSequence = payload.sequence_number;
    if (payload.type.endsWith(".delta")) this.outputChunks += 1;
    if (FINISHED.has(payload.type) && isJsonObject(payload.response)) {
      this.sawDone = true;
      this.answer = payload.response as ResponseObject;
      const usage = ResponseUsage.safeParse(payload.response.usage);
      if (usage.success) this.usage = chatUsageOfResponse(usage.data);
    }
    return event;
  }
}
