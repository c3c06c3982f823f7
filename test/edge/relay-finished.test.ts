import { describe, expect, it } from "vitest";
import { FINISHED_WAIT_MS, type ForwardedCall, relayJson, relayStream } from "../../src/edge/chat/relay";
import { SseRelayFilter } from "../../src/edge/chat/sse-filter";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";

/*
 * What a finished call records (its reply for the conversation index, a stored
 * response) must be there before the client sees the answer end: an agent sends its
 * next call the moment it has the answer. The relays wait for onFinished's work, but
 * never longer than FINISHED_WAIT_MS.
 */

const watch = () => ({ client: new AbortController().signal, deadline: new AbortController().signal, stallMs: 10_000, poolIdleMs: 10_000 });

/** A call whose onFinished work ends only when `finish` is called (or never). */
function callRecording() {
  let finish = () => {};
  const finished: unknown[] = [];
  const work = new Promise<void>((resolve) => (finish = resolve));
  const call: ForwardedCall = {
    programId: "prog_1",
    callId: "call_1",
    sentAt: Date.now(),
    promptEstimate: 1,
    pool: "pool-test",
    programSource: "new",
    usageOf: () => undefined,
    streamFilter: () => new SseRelayFilter(false),
    onFinished: (what) => {
      finished.push(what);
      return work;
    },
    settle: () => {},
  };
  return { call, finished, finish: () => finish() };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("an answer's end waits for what its call records", () => {
  it("a JSON answer is returned only once onFinished's work is done", async () => {
    const { call, finished, finish } = callRecording();
    const answer = { id: "x", object: "chat.completion", created: 1, model: "m", choices: [] };
    let returned = false;
    const relayed = relayJson(new Response(JSON.stringify(answer), { headers: { "content-type": "application/json" } }), call, watch()).then((res) => {
      returned = true;
      return res;
    });
    await tick();
    expect(finished).toEqual([{ answer }]);
    expect(returned).toBe(false);
    finish();
    expect((await relayed).status).toBe(200);
  });

  it("a stream's proper end reaches the client only once the reply is recorded", async () => {
    const { call, finished, finish } = callRecording();
    const chunk = { id: "x", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "hi" }, finish_reason: null }] };
    const pool = new Response(formatEvent(dataEvent(chunk)) + formatEvent(DONE_EVENT), { headers: { "content-type": "text/event-stream" } });
    const reader = relayStream(pool, call, watch()).body!.getReader();
    const decoder = new TextDecoder();
    expect(decoder.decode((await reader.read()).value)).toContain('"hi"');
    let done = false;
    const last = reader.read().then((r) => {
      done = true;
      return r;
    });
    await tick();
    expect(finished).toHaveLength(1);
    expect((finished[0] as { reply?: string }).reply).toContain("hi");
    expect(done).toBe(false);
    finish();
    expect(decoder.decode((await last).value)).toContain("[DONE]");
  });

  it("waits no longer than FINISHED_WAIT_MS for work that never ends", async () => {
    const { call } = callRecording();
    const started = Date.now();
    const res = await relayJson(new Response("{}", { headers: { "content-type": "application/json" } }), call, watch());
    expect(res.status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(FINISHED_WAIT_MS - 50);
    expect(Date.now() - started).toBeLessThan(FINISHED_WAIT_MS + 2_000);
  });
});
