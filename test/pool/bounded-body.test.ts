import { createHash } from "node:crypto";
import { createServer, type IncomingMessage } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BoundedBody, readIncomingBody } from "../../src/pool/bounded-body.js";

/*
 * A call's body read from Node's message (bounded-body.ts), over a real socket: a body
 * whose declared length has arrived is handed over at that chunk, before Node's parser
 * marks the message complete; one without a declared length (chunked) at its end. Either
 * way the same bytes and hash, the same refusal over the limit, and a client that leaves
 * mid-body still rejects.
 */

interface Read {
  body: BoundedBody | undefined;
  error: string | undefined;
  /** Whether Node had marked the message complete when the body was handed over. */
  completeAtHandover: boolean;
}

const LIMIT = 64;
let server: ReturnType<typeof createServer>;
let port = 0;
let reads: Promise<Read>[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    reads.push(
      readIncomingBody(req, LIMIT).then(
        (body) => {
          const read = { body, error: undefined, completeAtHandover: req.complete };
          res.end();
          return read;
        },
        (error: unknown) => ({ body: undefined, error: error instanceof Error ? error.message : String(error), completeAtHandover: req.complete }),
      ),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  port = typeof address === "object" && address !== null ? address.port : 0;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Writes these pieces of one request, each in its own socket write a loop turn apart; `hangUp`: then closes the socket. */
async function send(pieces: string[], hangUp = false): Promise<Read> {
  reads = [];
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  for (const piece of pieces) {
    socket.write(piece);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (hangUp) socket.destroy();
  for (let i = 0; i < 200 && reads.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  const read = await (reads[0] ?? Promise.reject(new Error("no request reached the server")));
  socket.destroy();
  return read;
}

const head = (lines: string) => `POST /v1/chat/completions HTTP/1.1\r\nHost: pool\r\n${lines}\r\n`;
const text = (body: BoundedBody | undefined) => (body?.ok === true ? Buffer.from(body.bytes).toString() : undefined);

describe("a call's body read from Node's message", () => {
  it("is handed over at the chunk that completes its declared length, before Node marks the message complete", async () => {
    const whole = await send([`${head("Content-Length: 11\r\n")}{"a":"bcd"}`]);
    expect(text(whole.body)).toBe('{"a":"bcd"}');
    expect(whole.completeAtHandover).toBe(false);

    const split = await send([`${head("Content-Length: 11\r\n")}{"a":`, '"bcd"}']);
    expect(text(split.body)).toBe('{"a":"bcd"}');
    expect(split.body?.ok === true ? split.body.sha256Hex : "").toBe(createHash("sha256").update('{"a":"bcd"}').digest("hex"));
    expect(split.completeAtHandover).toBe(false);
  });

  it("waits for the end of a body without a declared length", async () => {
    const chunked = await send([`${head("Transfer-Encoding: chunked\r\n")}5\r\n{"a":\r\n`, '6\r\n"bcd"}\r\n0\r\n\r\n']);
    expect(text(chunked.body)).toBe('{"a":"bcd"}');
    expect(chunked.completeAtHandover).toBe(true);
  });

  it("refuses a body over the limit at the chunk that passes it, whatever its declared length", async () => {
    const declared = await send([`${head(`Content-Length: ${LIMIT + 1}\r\n`)}`]);
    expect(declared.body).toEqual({ ok: false, receivedBytes: 0 });
    const sent = await send([`${head("Transfer-Encoding: chunked\r\n")}${(LIMIT + 1).toString(16)}\r\n${"x".repeat(LIMIT + 1)}\r\n0\r\n\r\n`]);
    expect(sent.body).toEqual({ ok: false, receivedBytes: LIMIT + 1 });
  });

  it("rejects when the client leaves before its declared length has arrived", async () => {
    const cut = await send([`${head("Content-Length: 11\r\n")}{"a":`], true);
    expect(cut.body).toBeUndefined();
    expect(cut.error).toMatch(/prematurely closed|aborted/);
  });
});
