import { openAIErrorBody } from "../../protocol/errors.js";
import { dataEvent, formatEvent, SseEventSplitter } from "../../protocol/sse.js";
import type { StreamRelayFilter } from "./sse-filter.js";

/**
 * How a relayed stream ended: the pool finished it; the client went away (or
 * stopped reading); the pool's side broke or fell silent; the call's deadline passed.
 */
export type StreamEnd = "complete" | "cancelled" | "failed" | "timeout";

export interface StreamWatch {
  /** Aborts when the client disconnects (request.signal). */
  client: AbortSignal;
  /** Aborts when the call has run out of time. */
  deadline: AbortSignal;
  /** A client that takes no event for this long while one waits is treated as gone. */
  stallMs: number;
  /** A pool that sends nothing for this long is treated as broken. */
  poolIdleMs: number;
}

class Stop extends Error {
  constructor(readonly end: Exclude<StreamEnd, "complete">) {
    super(end);
  }
}

/** What ends a wait early: each signal with the end it means. */
type Stops = readonly (readonly [AbortSignal, Stop])[];

/** The first of `work`, the stop signals, or the timer; the loser's timer and listeners are released. */
function within<T>(work: Promise<T>, stops: Stops, ms: number, onTimer: Stop): Promise<T> {
  for (const [signal, stop] of stops) if (signal.aborted) return Promise.reject(stop);
  return new Promise<T>((resolve, reject) => {
    const listeners = stops.map(([signal, stop]) => {
      const listener = () => finish(() => reject(stop));
      signal.addEventListener("abort", listener);
      return () => signal.removeEventListener("abort", listener);
    });
    const timer = setTimeout(() => finish(() => reject(onTimer)), ms);
    let done = false;
    function finish(settle: () => void) {
      if (done) return;
      done = true;
      clearTimeout(timer);
      for (const remove of listeners) remove();
      settle();
    }
    work.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

/**
 * Relays the pool's SSE body to the client event by event. The relay pushes:
 * a task (kept alive by the caller's waitUntil through `ended`) reads the pool
 * and writes into the response, so its end never depends on the runtime pulling
 * or cancelling the response body. It ends, exactly once, when the pool finishes;
 * when the client disconnects, cancels, or takes nothing for `stallMs`; when the
 * pool breaks off or is silent for `poolIdleMs`; or at the deadline. Any end but
 * "complete" cancels the pool's body, which stops the engine's work.
 * `beforeEnd` (which must not reject) runs once, before the proper end is relayed.
 */
export function relayEventStream(
  source: ReadableStream<Uint8Array>,
  filter: StreamRelayFilter,
  watch: StreamWatch,
  /** Awaited before the stream's proper end (the event that sets filter.sawDone) goes to the client. */
  beforeEnd?: () => Promise<void>,
): { body: ReadableStream<Uint8Array>; ended: Promise<StreamEnd> } {
  const events = source.pipeThrough(new SseEventSplitter()).getReader();
  // Readable high-water mark 0: a write completes only once the client has taken the event.
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>(undefined, undefined, {
    highWaterMark: 0,
  });
  const writer = writable.getWriter();
  // The client cancelling the response body errors the writable side at once, even between writes.
  const bodyCancelled = new AbortController();
  writer.closed.catch(() => bodyCancelled.abort());
  const stops: Stops = [
    [watch.client, new Stop("cancelled")],
    [bodyCancelled.signal, new Stop("cancelled")],
    [watch.deadline, new Stop("timeout")],
  ];
  const encoder = new TextEncoder();
  const clientStalled = new Stop("cancelled");
  const poolSilent = new Stop("failed");

  const pump = async (): Promise<StreamEnd> => {
    for (;;) {
      const next = await within(events.read(), stops, watch.poolIdleMs, poolSilent);
      if (next.done) return "complete";
      const endedBefore = filter.sawDone;
      const out = filter.pass(next.value);
      if (!endedBefore && filter.sawDone && beforeEnd) await beforeEnd();
      if (out === undefined) continue;
      // A write that rejects means the client's side was cancelled: the client is gone.
      await within(
        writer.write(encoder.encode(formatEvent(out))).catch(() => {
          throw new Stop("cancelled");
        }),
        stops,
        watch.stallMs,
        clientStalled,
      );
    }
  };

  const ended = pump().then(
    async (end) => {
      await writer.close().catch(() => undefined);
      return end;
    },
    async (error: unknown) => {
      const end: StreamEnd = error instanceof Stop ? error.end : "failed";
      await events.cancel().catch(() => undefined);
      // Not awaited: with a write still waiting on a client that stopped reading, close waits forever.
      // Closed, not aborted: an abort's reason would be logged by the runtime as an uncaught error for
      // every client that hangs up.
      if (end === "cancelled") {
        writer.close().catch(() => undefined);
      } else {
        // Tell a client still reading why the stream stops (no [DONE]: it was cut short).
        const message =
          end === "timeout" ? "The call ran past its time limit and was stopped." : "The GPU pool's stream broke off.";
        const code = end === "timeout" ? "call_timeout" : "pool_stream_broken";
        const error = openAIErrorBody(502, message, { code });
        writer.write(encoder.encode(filter.errorEvent ? filter.errorEvent(error) : dataEvent(error))).catch(() => undefined);
        writer.close().catch(() => undefined);
      }
      return end;
    },
  );
  return { body: readable, ended };
}
