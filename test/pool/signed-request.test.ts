import { createServer, type IncomingMessage } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Header } from "../../src/protocol/headers.js";
import { parseSignedForwardHeaders } from "../../src/protocol/signing.js";
import { nodeHeaders } from "../../src/pool/signed-request.js";
import { signedCall } from "./helpers.js";

/*
 * The pool reads a call's signed headers from Node's parsed request (signed-request.ts),
 * where it read @hono/node-server's WHATWG Headers. Whatever a client sends, both must
 * read the same values, so the same requests are refused for the same reasons: sent
 * here over a real socket, as written (case, repeats, padding), and read both ways.
 */

let server: ReturnType<typeof createServer>;
let port = 0;
const received: IncomingMessage[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    received.push(req);
    req.resume();
    req.on("end", () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  port = typeof address === "object" && address !== null ? address.port : 0;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends a request with exactly these header lines; resolves with Node's parsed message. */
function sendRaw(lines: [string, string][]): Promise<IncomingMessage> {
  const before = received.length;
  const text = `POST /v1/chat/completions HTTP/1.1\r\nHost: pool\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join("")}Content-Length: 2\r\nConnection: close\r\n\r\n{}`;
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(text));
    socket.on("error", reject);
    socket.on("close", () => {
      const req = received[before];
      if (req === undefined) reject(new Error("the server did not get the request"));
      else resolve(req);
    });
    socket.resume();
  });
}

/** The same request's headers as a WHATWG Headers, built from what Node received as sent. */
function webHeadersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i] ?? "", req.rawHeaders[i + 1] ?? "");
  return headers;
}

const READ = [
  Header.signature,
  Header.keyId,
  Header.tenant,
  Header.program,
  Header.thread,
  Header.call,
  Header.serviceMs,
  Header.pathMs,
  Header.waitMs,
  Header.engine,
  Header.weight,
  Header.contextGeneration,
  Header.ts,
  "content-length",
];

type Lines = [string, string][];
const CASES: [string, (lines: Lines) => Lines, "accepted" | "refused"][] = [
  ["as the edge sends them", (lines) => lines, "accepted"],
  ["with names in capitals", (lines) => lines.map(([name, value]) => [name.toUpperCase(), value]), "accepted"],
  ["with values padded by spaces and tabs", (lines) => lines.map(([name, value]) => [name, ` \t${value} \t`]), "accepted"],
  ["with a field sent twice", (lines) => [...lines, [Header.call, "call_other"]], "accepted"],
  ["with the signature sent twice", (lines) => [...lines, lines.find(([name]) => name === Header.signature) ?? ["x", "y"]], "refused"],
  ["with a field missing", (lines) => lines.filter(([name]) => name !== Header.tenant), "refused"],
  ["with a number that is not one", (lines) => lines.map(([name, value]) => [name, name === Header.ts ? `${value}x` : value]), "refused"],
  ["with the key ID sent twice", (lines) => [...lines, [Header.keyId.toUpperCase(), "other-key"]], "refused"],
];

describe("a call's signed headers, read from Node's parsed request", () => {
  it.each(CASES)("reads a call %s as WHATWG Headers reads it", async (_what, tamper, expected) => {
    const call = await signedCall();
    const lines: Lines = Object.entries(call.headers).filter(([name]) => name !== "content-type");
    const req = await sendRaw(tamper(lines));
    const node = nodeHeaders(req.headers);
    const web = webHeadersOf(req);
    for (const name of READ) expect(node.get(name), name).toBe(web.get(name));
    const fromNode = parseSignedForwardHeaders(node);
    expect(fromNode).toEqual(parseSignedForwardHeaders(web));
    // "Accepted" here is the headers' parse; a repeated field still fails the MAC (auth.test.ts).
    expect(fromNode.ok ? "accepted" : "refused").toBe(expected);
  });
});
