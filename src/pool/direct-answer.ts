import type { ServerResponse } from "node:http";

/*
 * Answers the pool's HTTP server may write straight to the client's Node response
 * instead of handing @hono/node-server a Response to convert: a relayed stream
 * (no web-stream reader, its headers in the first write) and a whole engine answer
 * (no Headers object built and read back). The Response stays a complete answer
 * for everyone else (a translation of it, Hono's app.request() in tests); a relayed
 * stream withdraws its offer when its web body is first read.
 */

/** Writes the answer with these headers added (the pool's load, known only when it is sent). */
export type DirectWriter = (outgoing: ServerResponse, extraHeaders: Readonly<Record<string, string>>) => void;

const writers = new WeakMap<Response, DirectWriter>();

export function offerDirectWrite(response: Response, writer: DirectWriter): void {
  writers.set(response, writer);
}

export function withdrawDirectWrite(response: Response): void {
  writers.delete(response);
}

/**
 * Writes `response` to `outgoing` when it was offered; false otherwise (the caller sends
 * it as usual). Its bodyUsed or body is never read: on @hono/node-server's lightweight
 * Response either builds the full WHATWG Response (~1.6 % of a streaming call's CPU).
 */
export function writeDirectAnswer(response: Response, outgoing: ServerResponse, extraHeaders: Readonly<Record<string, string>>): boolean {
  const write = writers.get(response);
  if (write === undefined) return false;
  writers.delete(response);
  write(outgoing, extraHeaders);
  handedOver(response);
  return true;
}

/*
 * What waits until an answer has left: a whole answer's attempt ends (its slot, metrics,
 * TAO's signals, the next call's start: relay.ts endAfterAnswer) once its bytes are
 * written, or once it is handed to whoever writes it otherwise.
 */
const afterwards = new WeakMap<Response, () => void>();

export function afterHandingOver(response: Response, run: () => void): void {
  afterwards.set(response, run);
}

/** `response` was written straight or handed to its writer: what waited for that runs now (once). */
export function handedOver(response: Response): void {
  const run = afterwards.get(response);
  if (run === undefined) return;
  afterwards.delete(response);
  run();
}
