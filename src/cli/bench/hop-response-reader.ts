/*
 * Where an HTTP/1.1 response ends, read from a raw socket's chunks as they arrive:
 * its status line and headers, then a Content-Length body or a chunked one. The hop
 * trace's client (hop-client.ts) takes its "last byte" time at the chunk that
 * completes the response, with no HTTP client library between the socket and the
 * clock. Enough of HTTP for a proxy's answer: no trailers, no 1xx, no close-delimited body.
 */

export type ResponseProgress = { done: false } | { done: true; status: number; body: string };

const HEADER_END = "\r\n\r\n";

export class HttpResponseReader {
  #buffer = "";
  #status = 0;
  /** Remaining body bytes of a Content-Length body; undefined: chunked, or headers not read yet. */
  #contentLength: number | undefined;
  #chunked = false;
  #headersRead = false;
  #body = "";

  /** Feeds one chunk (latin1, so byte counts hold); done once the response is complete. */
  push(chunk: Buffer): ResponseProgress {
    this.#buffer += chunk.toString("latin1");
    if (!this.#headersRead && !this.#readHeaders()) return { done: false };
    return this.#chunked ? this.#readChunks() : this.#readLength();
  }

  #readHeaders(): boolean {
    const end = this.#buffer.indexOf(HEADER_END);
    if (end === -1) return false;
    const lines = this.#buffer.slice(0, end).split("\r\n");
    const statusLine = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "");
    if (statusLine === null) throw new Error(`not an HTTP response: ${JSON.stringify((lines[0] ?? "").slice(0, 80))}`);
    this.#status = Number(statusLine[1]);
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "content-length") this.#contentLength = Number(value);
      if (name === "transfer-encoding" && value.toLowerCase().includes("chunked")) this.#chunked = true;
    }
    if (!this.#chunked && this.#contentLength === undefined) throw new Error("response has neither Content-Length nor chunked encoding");
    this.#buffer = this.#buffer.slice(end + HEADER_END.length);
    this.#headersRead = true;
    return true;
  }

  #readLength(): ResponseProgress {
    const length = this.#contentLength ?? 0;
    if (this.#buffer.length < length) return { done: false };
    return this.#finish(this.#buffer.slice(0, length));
  }

  #readChunks(): ResponseProgress {
    for (;;) {
      const lineEnd = this.#buffer.indexOf("\r\n");
      if (lineEnd === -1) return { done: false };
      const size = Number.parseInt(this.#buffer.slice(0, lineEnd), 16);
      if (!Number.isFinite(size)) throw new Error("malformed chunk size");
      if (size === 0) {
        // The last chunk, then an empty trailer section.
        if (this.#buffer.length < lineEnd + 4) return { done: false };
        return this.#finish(this.#body);
      }
      const dataEnd = lineEnd + 2 + size;
      if (this.#buffer.length < dataEnd + 2) return { done: false };
      this.#body += this.#buffer.slice(lineEnd + 2, dataEnd);
      this.#buffer = this.#buffer.slice(dataEnd + 2);
    }
  }

  #finish(latin1Body: string): ResponseProgress {
    const body = Buffer.from(latin1Body, "latin1").toString("utf8");
    const status = this.#status;
    this.#buffer = "";
    this.#body = "";
    this.#headersRead = false;
    this.#chunked = false;
    this.#contentLength = undefined;
    return { done: true, status, body };
  }
}
