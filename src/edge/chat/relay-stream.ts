import { formatEvent, SseEventSplitter } from "../../protocol/sse.js";
import type { SseRelayFilter } from "./sse-filter.js";

/** How a relayed stream ended: the pool finished it, the client went away, or the pool's side broke. */
export type StreamEnd = "complete" | "cancelled" | "failed";

/**
 * Relays the pool's SSE body to the client event by event as it arrives (pulled
 * by the client, so nothing is buffered beyond the event being cut). A client
 * that disconnects cancels this stream, which cancels the pool's body in turn.
 */
export function relayEventStream(
  source: ReadableStream<Uint8Array>,
  filter: SseRelayFilter,
): { body: ReadableStream<Uint8Array>; ended: Promise<StreamEnd> } {
  const events = source.pipeThrough(new SseEventSplitter()).getReader();
  const encoder = new TextEncoder();
  let settle!: (end: StreamEnd) => void;
  const ended = new Promise<StreamEnd>((resolve) => {
    settle = resolve;
  });
  let finished = false;
  const finish = (end: StreamEnd) => {
    if (finished) return false;
    finished = true;
    settle(end);
    return true;
  };

  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        for (;;) {
          const { done, value } = await events.read();
          if (finished) return;
          if (done) {
            finish("complete");
            controller.close();
            return;
          }
          const out = filter.pass(value);
          if (out !== undefined) {
            controller.enqueue(encoder.encode(formatEvent(out)));
            return;
          }
        }
      } catch (error) {
        if (finish("failed")) controller.error(error);
      }
    },
    async cancel(reason) {
      finish("cancelled");
      await events.cancel(reason).catch(() => undefined);
    },
  });
  return { body, ended };
}
