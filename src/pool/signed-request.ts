import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { HeaderLookup } from "../protocol/forward.js";
import { type BoundedBody, readBoundedBody, readIncomingBody } from "./bounded-body.js";

/*
 * What the signature checks read of a request (verify-forward.ts): its method, its
 * headers as WHATWG `Headers.get` reads them, and its body under a byte limit. Behind
 * the pool's server all three come straight from Node's IncomingMessage; a Web Request
 * without one (Hono's `app.request()` in tests) is read as such.
 */

export interface SignedRequest {
  method: string;
  headers: HeaderLookup;
  /** The body and its SHA-256, refused at the chunk that passes `maxBytes` (bounded-body.ts). */
  readBody(maxBytes: number): Promise<BoundedBody>;
}

/**
 * Node's parsed headers, read as `Headers.get` reads them. Node has already joined a
 * repeated header with ", " (as `Headers.get` does) except for a few single-valued
 * standard ones, where it keeps the first, and set-cookie, an array; its parser has
 * trimmed the values and refused a request whose value holds a NUL, CR or LF, which
 * `Headers` would not hold either. The old path built @hono/node-server's Headers
 * wrapper and asked it each name (a name check, a trim and a character test per get).
 */
export function nodeHeaders(headers: IncomingHttpHeaders): HeaderLookup {
  return {
    get(name) {
      const value = headers[name];
      if (value === undefined) return null;
      return typeof value === "string" ? value : value.join(", ");
    },
  };
}

export function nodeSignedRequest(incoming: IncomingMessage): SignedRequest {
  return {
    method: incoming.method ?? "",
    headers: nodeHeaders(incoming.headers),
    readBody(maxBytes) {
      return readIncomingBody(incoming, maxBytes);
    },
  };
}

export function webSignedRequest(request: Request): SignedRequest {
  return {
    method: request.method,
    headers: request.headers,
    readBody(maxBytes) {
      return readBoundedBody(request, maxBytes);
    },
  };
}
