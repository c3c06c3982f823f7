import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { parseStatsEvent } from "../../src/protocol/stats.js";
import { type RelayEnd, type RelayStart, relayToEngine } from "../../src/pool/relay.js";
import { piecesAt } from "../protocol/sse-texts.js";
import { streamRelayRequest } from "./helpers.js";

/*
 * A relayed stream goes out as the engine's own bytes (relay-event-stream.ts,
 * event-text.ts): multi-byte characters cut between the engine's writes, CRLF
 * boundaries and a `[DONE]` split in two arrive unchanged, with only the pool's stats
 * comment put in just before `[DONE]`; the usage and tool calls are read from them
 * all the same. Both ways out: the Node response the pool's server writes, and the
 * Response a translation reads.
 */

const chunk = (extra: object) => JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", ...extra });
const EVENTS = [
  `data: ${chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "café ☕ 🙂" }, finish_reason: null }] })}\n\n`,
  `data: ${chunk({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "write", arguments: '{"text":"naïve 🙂"}' } }] }, finish_reason: null }] })}\r\n\r\n`,
  `data: ${chunk({ choices: [], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10, prompt_tokens_details: { cached_tokens: 4 } } })}\r\n\r\n`,
  "data: [DONE]\n\n",
];
const STREAM = Buffer.from(EVENTS.join(""), "utf8");

/** The engine's writes: cut inside "é", inside the arguments' 🙂, between a CRLF boundary's halves, and inside "[DONE]". */
function enginePieces(): Uint8Array[] {
  return piecesAt(STREAM, [
    STREAM.indexOf(Buffer.from("é")) + 1,
    STREAM.indexOf(Buffer.from("🙂", "utf8"), STREAM.indexOf(Buffer.from("naïve"))) + 2,
    STREAM.indexOf(Buffer.from("\r\n\r\n")) + 2,
    STREAM.indexOf(Buffer.from("[DO")) + 3,
  ]);
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** An engine that writes the stream in its pieces, a few ms apart (so the relay reads them apart). */
async function startEngine(): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", async () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const piece of enginePieces()) {
        res.write(piece);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      res.end();
    });
  });
  return listen(server);
}

async function relayStart(engineUrl: string, ends: RelayEnd[]): Promise<RelayStart & { kind: "response" }> {
  const http = new Agent();
  cleanups.push(() => http.destroy());
  const req = streamRelayRequest(engineUrl, http, "call_bytes", (end) => ends.push(end));
  const start = await relayToEngine(req);
  if (start.kind !== "response") throw new Error(`no response: ${start.kind}`);
  return start;
}

/** The bytes relayed: the engine's, with the stats comment just before `data: [DONE]`, and nothing else. */
function expectEngineBytesWithStats(received: Buffer): void {
  const done = STREAM.indexOf(Buffer.from("data: [DONE]"));
  expect(received.subarray(0, done).equals(STREAM.subarray(0, done))).toBe(true);
  expect(received.subarray(received.length - (STREAM.length - done)).equals(STREAM.subarray(done))).toBe(true);
  const inserted = received.subarray(done, received.length - (STREAM.length - done)).toString("utf8");
  expect(inserted.endsWith("\n\n")).toBe(true);
  expect(parseStatsEvent(inserted.trimEnd())).toMatchObject({ engine: "e1", queueMs: 0 });
}

function expectFactsRead(ends: readonly RelayEnd[]): void {
  expect(ends.map((end) => end.outcome)).toEqual(["completed"]);
  expect(ends[0]?.facts).toEqual({
    usage: { promptTokens: 7, completionTokens: 3, cachedTokens: 4 },
    toolCalls: [{ tool: "write", toolCallId: "call_1", args: '{"text":"naïve 🙂"}' }],
  });
}

describe("a relayed stream's bytes", () => {
  it("through the Response a translation reads: the engine's bytes, the stats before [DONE], the facts read", async () => {
    const ends: RelayEnd[] = [];
    const start = await relayStart(await startEngine(), ends);
    const received = Buffer.from(await start.response.arrayBuffer());
    expectEngineBytesWithStats(received);
    expectFactsRead(ends);
  });

  it("through the Node response the pool's server writes: the same", async () => {
    const engineUrl = await startEngine();
    const ends: RelayEnd[] = [];
    const front = createServer((_req, res) => {
      relayStart(engineUrl, ends).then(
        (start) => {
          if (start.direct === undefined) res.end("no direct answer");
          else start.direct.write(res, {});
        },
        (error: unknown) => res.end(String(error)),
      );
    });
    const url = await listen(front);
    const answer = await request(url, { method: "POST", body: "{}" });
    const received = Buffer.from(await answer.body.arrayBuffer());
    expect(answer.headers["content-type"]).toContain("text/event-stream");
    expectEngineBytesWithStats(received);
    expectFactsRead(ends);
  });
});
