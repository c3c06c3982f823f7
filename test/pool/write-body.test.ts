import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeBody } from "../../src/pool/relay.js";

/* A whole answer's body reaches the client byte for byte, whichever way writeBody sends it (a latin1 string, or the bytes). */

let server: Server;
let url: string;
let body = new Uint8Array();

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(body.byteLength) });
    writeBody(res, body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

async function roundTrip(bytes: Uint8Array): Promise<Uint8Array> {
  body = bytes;
  return new Uint8Array(await (await fetch(url)).arrayBuffer());
}

describe("writeBody", () => {
  it("sends every byte value, invalid UTF-8 and multi-byte characters unchanged", async () => {
    const every = Uint8Array.from({ length: 512 }, (_, i) => (i * 7) % 256);
    const text = new TextEncoder().encode('{"content":"héllo 😀 ключ 秘密"}');
    const invalid = Uint8Array.from([0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x82, 0xff, 0xf0, 0x9f, 0x98]);
    for (const bytes of [every, text, invalid, new Uint8Array()]) expect(await roundTrip(bytes)).toEqual(bytes);
  });

  it("sends a view into a larger buffer as just its own bytes", async () => {
    const whole = Uint8Array.from({ length: 300 }, (_, i) => i % 256);
    const view = whole.subarray(100, 250);
    expect(await roundTrip(view)).toEqual(whole.slice(100, 250));
  });

  it("sends a body over the string limit as is", async () => {
    const large = Uint8Array.from({ length: 200_000 }, (_, i) => (i * 31) % 256);
    expect(await roundTrip(large)).toEqual(large);
  });
});
