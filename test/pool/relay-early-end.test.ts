import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { type RelayEnd, relayToEngine } from "../../src/pool/relay.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { streamRelayRequest } from "./helpers.js";

/*
 * A relayed stream whose engine ends (or breaks off) before anyone reads its answer:
 * the Response read later still carries every event the engine sent, then the end
 * (or the error event), and closes; the attempt ends once, when the engine is done.
 * The split flows read a leg's Response after a wait of their own.
 */

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function relayed(engine: FakeEngine): Promise<{ response: Response; ends: RelayEnd[] }> {
  const http = new Agent();
  cleanups.push(() => http.destroy());
  const ends: RelayEnd[] = [];
  const req = streamRelayRequest(engine.url, http, "call_early", (end) => ends.push(end));
  const start = await relayToEngine(req);
  if (start.kind !== "response") throw new Error(`no response: ${start.kind}`);
  return { response: start.response, ends };
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 100));

describe("a relayed stream that ends before anyone reads it", () => {
  it("a stream broken off before a reader: the events so far, the error event, then the end", async () => {
    const engine = await startFakeEngine({ behave: () => ({ kind: "stream", breakAfterFirst: true }) });
    cleanups.push(() => engine.close());
    const { response, ends } = await relayed(engine);
    (await engine.call(0)).release();
    await settled();
    // The engine is done: the attempt ended, though nobody has read a byte.
    expect(ends.map((end) => end.outcome)).toEqual(["failed"]);
    const text = await Promise.race([response.text(), settled().then(() => settled()).then(() => "hung")]);
    expect(text).toContain('"content":"Hel"');
    expect(text).toContain("engine_stream_error");
    expect(text).not.toContain("[DONE]");
    expect(ends).toHaveLength(1);
  });

  it("a whole stream before a reader: every event and [DONE], then the end", async () => {
    const engine = await startFakeEngine({ behave: () => ({ kind: "stream" }) });
    cleanups.push(() => engine.close());
    const { response, ends } = await relayed(engine);
    (await engine.call(0)).release();
    await settled();
    const text = await response.text();
    expect(text).toContain('"content":"Hel"');
    expect(text).toContain('"content":"lo"');
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(ends.map((end) => end.outcome)).toEqual(["completed"]);
  });
});
