import { hash } from "node:crypto";
import type { IncomingMessage } from "node:http";

/*
 * A request body read under a byte limit, and its SHA-256 (the signature covers it).
 * Bytes are counted as they arrive, so a body over the limit is
 * refused at the chunk that passes it, whatever Content-Length said (a declared
 * length over the limit is refused before any byte is read). The caller checks the
 * signature headers first: only a request that claims a fresh, well-formed edge
 * signature gets this far.
 *
 * Behind the pool's server the body is read from Node's IncomingMessage itself:
 * @hono/node-server's `request.body` builds a whole WHATWG Request and two web streams
 * around the socket (~5 % of the pool's busy time in bench:proxy's profile). A Request
 * without a Node message (Hono's `app.request()` in tests) is read through its web stream.
 */

export type BoundedBody =
  | { ok: true; bytes: Uint8Array; sha256Hex: string }
  /** Over the limit: `receivedBytes` is what had arrived when it was refused (0 when Content-Length said so). */
  | { ok: false; receivedBytes: number };

/**
 * Counts and keeps chunks until the limit is passed; the whole body is hashed at its end,
 * in one call (crypto.hash: no Hash object per request, a third of createHash's time on
 * a 300-byte body), since it is kept whole anyway.
 */
class BodyAccumulator {
  readonly #chunks: Uint8Array[] = [];
  size = 0;
  constructor(readonly maxBytes: number) {}

  /** False once the body is over the limit (the chunk is not kept). */
  add(chunk: Uint8Array): boolean {
    this.size += chunk.byteLength;
    if (this.size > this.maxBytes) return false;
    this.#chunks.push(chunk);
    return true;
  }

  done(): BoundedBody {
    const bytes = this.#chunks.length === 1 ? (this.#chunks[0] as Uint8Array) : Buffer.concat(this.#chunks, this.size);
    return { ok: true, bytes, sha256Hex: hash("sha256", bytes, "hex") };
  }
}

/** A declared length over the limit: refused before any byte is read. */
const declaredOver = (declared: string | null | undefined, maxBytes: number): boolean => declared != null && Number(declared) > maxBytes;

/** From a Web Request's stream (Hono's `app.request()` in tests). */
export async function readBoundedBody(request: Request, maxBytes: number): Promise<BoundedBody> {
  if (declaredOver(request.headers.get("content-length"), maxBytes)) return { ok: false, receivedBytes: 0 };
  const body = new BodyAccumulator(maxBytes);
  if (request.body !== null) {
    const reader = request.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!body.add(value)) {
        // The rest is not read; the HTTP server drains or drops it after the 413.
        void reader.cancel().catch(() => undefined);
        return { ok: false, receivedBytes: body.size };
      }
    }
  }
  return body.done();
}

/**
 * The body's length when Content-Length declares it (without Transfer-Encoding, which
 * Node's parser would go by instead); undefined otherwise.
 */
function declaredLength(incoming: IncomingMessage): number | undefined {
  const declared = incoming.headers["content-length"];
  if (declared === undefined || incoming.headers["transfer-encoding"] !== undefined) return undefined;
  const length = Number(declared);
  return Number.isSafeInteger(length) && length > 0 ? length : undefined;
}

/**
 * The same from Node's message; a client that goes away mid-body rejects (as the web
 * stream's read does). A body whose declared length has arrived is whole at that chunk:
 * Node's parser ends the message at that count, and its 'end' comes only ticks later
 * (the parser's completion, then the stream's end, each in its own tick: 6 µs p50 in
 * bench:hop's probes), so it is not waited for. A body without a declared length waits
 * for 'end'.
 */
export function readIncomingBody(incoming: IncomingMessage, maxBytes: number): Promise<BoundedBody> {
  if (declaredOver(incoming.headers["content-length"], maxBytes)) return Promise.resolve({ ok: false, receivedBytes: 0 });
  const body = new BodyAccumulator(maxBytes);
  if (incoming.readableEnded) return Promise.resolve(body.done());
  const length = declaredLength(incoming);
  return new Promise((resolve, reject) => {
    // Methods, not named closures: the pool's tsx renames each named closure it makes (relay-attempt.ts).
    const listeners = {
      data(chunk: Buffer): void {
        if (body.add(chunk)) {
          if (body.size !== length) return;
          listeners.off();
          resolve(body.done());
          return;
        }
        listeners.off();
        // The rest is not read; @hono/node-server drains or drops it after the 413.
        incoming.pause();
        resolve({ ok: false, receivedBytes: body.size });
      },
      end(): void {
        listeners.off();
        resolve(body.done());
      },
      error(error: Error): void {
        listeners.off();
        reject(error);
      },
      close(): void {
        listeners.off();
        if (incoming.readableEnded) resolve(body.done());
        else reject(new Error("Client connection prematurely closed."));
      },
      off(): void {
        incoming.off("data", listeners.data);
        incoming.off("end", listeners.end);
        incoming.off("error", listeners.error);
        incoming.off("close", listeners.close);
      },
    };
    incoming.on("data", listeners.data);
    incoming.on("end", listeners.end);
    incoming.on("error", listeners.error);
    incoming.on("close", listeners.close);
  });
}
