import { createHash } from "node:crypto";

/*
 * A request body read under a byte limit, hashed as it streams in (the signature
 * covers its SHA-256). Bytes are counted as they arrive, so a body over the limit is
 * refused at the chunk that passes it, whatever Content-Length said (a declared
 * length over the limit is refused before any byte is read). The caller checks the
 * signature headers first: only a request that claims a fresh, well-formed edge
 * signature gets this far.
 */

export type BoundedBody =
  | { ok: true; bytes: Uint8Array; sha256Hex: string }
  /** Over the limit: `receivedBytes` is what had arrived when it was refused (0 when Content-Length said so). */
  | { ok: false; receivedBytes: number };

export async function readBoundedBody(request: Request, maxBytes: number): Promise<BoundedBody> {
  const declared = request.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) return { ok: false, receivedBytes: 0 };
  const hash = createHash("sha256");
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (request.body !== null) {
    const reader = request.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        // The rest is not read; the HTTP server drains or drops it after the 413.
        void reader.cancel().catch(() => undefined);
        return { ok: false, receivedBytes: size };
      }
      hash.update(value);
      chunks.push(value);
    }
  }
  return { ok: true, bytes: Buffer.concat(chunks, size), sha256Hex: hash.digest("hex") };
}
