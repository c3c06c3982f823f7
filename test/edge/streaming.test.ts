import { afterEach, describe, expect, it, vi } from "vitest";
import { SseRelayFilter } from "../../src/edge/chat/sse-filter";
import { Header } from "../../src/protocol/headers";
import { dataEvent, DONE_EVENT, formatEvent } from "../../src/protocol/sse";
import { statsCommentEvent } from "../../src/protocol/stats";
import {
  chat,
  chatBody,
  chunk,
  drain,
  gate,
  mockPool,
  newTenant,
  poolSseEvents,
  programHeader,
  sseResponse,
  tenantFetch,
  usageObject,
  usageRows,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

/** The data payloads of an SSE body, and whether any comment line reached the client. */
function parseSse(text: string) {
  const events = text.split("\n\n").filter((e) => e.length > 0);
  return {
    events,
    data: events.filter((e) => e.startsWith("data: ")).map((e) => e.slice(6)),
    comments: events.filter((e) => e.startsWith(":")),
  };
}

describe("streaming relay", () => {
  it("strips the stats comment, drops the usage chunk when not asked for, and keeps [DONE]", async () => {
    mockPool(() => sseResponse(poolSseEvents(["Hel", "lo", "!"], { usage: { prompt: 30, completion: 3, cached: 16 } })));
    const tenant = await newTenant();
    const res = await chat(tenant, chatBody({ stream: true }));
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const programId = programHeader(res)!;
    expect(programId).toMatch(/^prog_/);

    const { data, comments } = parseSse(await res.text());
    expect(comments).toEqual([]);
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d) as { choices: { delta: { content: string } }[]; usage?: unknown });
    expect(chunks.map((c) => c.choices[0]?.delta.content)).toEqual(["Hel", "lo", "!"]);
    expect(chunks.every((c) => c.usage === undefined)).toBe(true);

    await drain();
    expect(await usageRows(programId)).toEqual([
      expect.objectContaining({
        status: "ok",
        prompt_tokens: 30,
        cached_tokens: 16,
        completion_tokens: 3,
        engine: "engine-a",
        service_ms: 100,
        queue_ms: 5,
      }),
    ]);
  });

  it("keeps the usage chunk when the client asked for include_usage", async () => {
    mockPool(() => sseResponse(poolSseEvents(["a", "b"], { usage: { prompt: 9, completion: 2 } })));
    const tenant = await newTenant();
    const res = await chat(tenant, chatBody({ stream: true, stream_options: { include_usage: true } }));
    const { data, comments } = parseSse(await res.text());
    expect(comments).toEqual([]);
    expect(data).toHaveLength(4);
    expect(data[3]).toBe("[DONE]");
    expect(JSON.parse(data[2]!)).toEqual(chunk(null, { usage: usageObject({ prompt: 9, completion: 2 }) }));
    await drain();
  });

  it("relays each event as it arrives, before the pool has finished", async () => {
    const encoder = new TextEncoder();
    const more = gate();
    mockPool(() =>
      sseResponse(
        new ReadableStream<Uint8Array>({
          async start(controller) {
            controller.enqueue(encoder.encode(dataEvent(chunk("first"))));
            await more.promise;
            for (const e of poolSseEvents(["second"])) controller.enqueue(encoder.encode(e));
            controller.close();
          },
        }),
      ),
    );
    const tenant = await newTenant();
    const res = await chat(tenant, chatBody({ stream: true }));
    const reader = res.body!.getReader();
    const firstRead = await reader.read();
    expect(new TextDecoder().decode(firstRead.value)).toContain('"first"');
    more.open();
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    expect(rest).toContain('"second"');
    expect(rest.endsWith(`${DONE_EVENT}\n\n`)).toBe(true);
    await drain();
  });

  it("settles a stream the client abandons as cancelled, counting the chunks it saw", async () => {
    const encoder = new TextEncoder();
    let poolCancelled = false;
    mockPool(() =>
      sseResponse(
        new ReadableStream<Uint8Array>({
          start(controller) {
            for (const p of ["one", "two", "three"]) controller.enqueue(encoder.encode(dataEvent(chunk(p))));
            // ...and then the engine keeps generating; the client leaves first.
          },
          cancel() {
            poolCancelled = true;
          },
        }),
      ),
    );
    const tenant = await newTenant();
    const messages = [{ role: "user", content: "x".repeat(400) }];
    const res = await chat(tenant, chatBody({ stream: true, messages }));
    const programId = programHeader(res)!;
    const reader = res.body!.getReader();
    let seen = "";
    while ((seen.match(/"content"/g) ?? []).length < 3) {
      const { value } = await reader.read();
      seen += new TextDecoder().decode(value);
    }
    await reader.cancel("client went away");
    await drain();
    expect(poolCancelled).toBe(true);
    const rows = await usageRows(programId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ status: "cancelled", completion_tokens: 3, engine: "" });
    // No usage from the engine: the prompt is estimated (≈ 4 chars a token).
    expect(rows[0]!.prompt_tokens).toBeGreaterThanOrEqual(100);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { in_flight: number };
    expect(state.in_flight).toBe(0);
  });

  it("settles a stream that ends without [DONE] as an error", async () => {
    mockPool(() => sseResponse([dataEvent(chunk("partial"))]));
    const tenant = await newTenant();
    const res = await chat(tenant, chatBody({ stream: true }));
    const programId = programHeader(res)!;
    expect(parseSse(await res.text()).data).toHaveLength(1);
    await drain();
    expect(await usageRows(programId)).toEqual([expect.objectContaining({ status: "error", completion_tokens: 1 })]);
  });

  it("carries the program header on streams that continue a program", async () => {
    mockPool(() => sseResponse(poolSseEvents(["x"])));
    const tenant = await newTenant();
    const first = await chat(tenant, chatBody({ stream: true }));
    const programId = programHeader(first)!;
    await first.text();
    await drain();
    const second = await chat(tenant, chatBody({ stream: true }), { [Header.program]: programId });
    expect(programHeader(second)).toBe(programId);
    await second.text();
    await drain();
    expect(await usageRows(programId)).toHaveLength(2);
  });
});

describe("SseRelayFilter", () => {
  it("passes unknown comments and non-JSON data through, and captures stats and usage", () => {
    const filter = new SseRelayFilter(false);
    expect(filter.pass(": keep-alive")).toBe(": keep-alive");
    expect(filter.pass("data: not json")).toBe("data: not json");
    const stats = statsCommentEvent({ engine: "e1", queueMs: 1, serviceMs: 2 }).trim();
    expect(filter.pass(stats)).toBeUndefined();
    expect(filter.stats).toEqual({ engine: "e1", queueMs: 1, serviceMs: 2 });
    const usageChunk = formatEvent(`data: ${JSON.stringify(chunk(null, { usage: usageObject({ prompt: 1, completion: 1 }) }))}`).trim();
    expect(filter.pass(usageChunk)).toBeUndefined();
    expect(filter.usage?.prompt_tokens).toBe(1);
    expect(filter.pass(DONE_EVENT)).toBe(DONE_EVENT);
    expect(filter.sawDone).toBe(true);
  });

  it("counts only chunks that carry output", () => {
    const filter = new SseRelayFilter(true);
    filter.pass(dataEvent(chunk("")).trim());
    filter.pass(dataEvent(chunk("a")).trim());
    filter.pass(
      dataEvent({ ...chunk(null), choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: "{" } }] } }] }).trim(),
    );
    expect(filter.outputChunks).toBe(2);
  });
});
