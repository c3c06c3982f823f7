import { afterEach, describe, expect, it, vi } from "vitest";
import { MAX_TOOL_RUNS, TOOL_EVENTS_PER_MINUTE } from "../../src/edge/program/tool-store";
import { Header, RateLimitHeader } from "../../src/protocol/headers";
import { verifyForward } from "../../src/protocol/signing";
import { MAX_TOOL_EVENTS_PER_BATCH, ToolEventBatch } from "../../src/protocol/tool-events";
import {
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  frozenClock,
  mockPool,
  newTenant,
  poolJson,
  programHeader,
  CALL_ROUTE,
  EVENTS_ROUTE,
  POOL_CHAT_URL,
  POOL_KEYS,
  type PoolHandler,
  type TestTenant,
  tenantFetch,
} from "./support";

const POOL_EVENTS_URL = "http://pool.test/v1/events";

afterEach(() => {
  vi.restoreAllMocks();
});

/**
 * A program one call has run on (an engine of pool-test served it), so it has a pool
 * for its events; the pool must be mocked (mockEventsPool).
 */
async function newProgram(tenant: TestTenant): Promise<string> {
  const res = await chat(tenant);
  expect(res.status).toBe(200);
  await drain();
  return programHeader(res)!;
}

/** A fake pool that answers calls as an engine would and event batches with `handler`. */
function mockEventsPool(handler: PoolHandler) {
  return mockPool((forwarded) => (forwarded.request.url === POOL_CHAT_URL ? poolJson() : handler(forwarded)));
}

function sendEvents(tenant: TestTenant, programId: string, body: unknown): Promise<Response> {
  return tenantFetch(tenant, `/v1/programs/${programId}/events`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

interface ToolsView {
  in_flight: { tool: string | null; tool_call_id: string | null; thread: string; started_at: number; expected_duration_ms: number | null; deadline: number | null }[];
  last_started_at: number | null;
  last_finished_at: number | null;
  threads: { name: string; last_started_at: number | null; last_finished_at: number | null }[];
  events: { tool_started: number; tool_finished: number };
}

async function toolsOf(tenant: TestTenant, programId: string): Promise<ToolsView> {
  const res = await tenantFetch(tenant, `/v1/programs/${programId}`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { tools: ToolsView }).tools;
}

/** The fake pool's view of the edge's requests, event batches only. */
function eventBatches(seen: ReturnType<typeof mockPool>) {
  return seen.filter((f) => f.request.url === POOL_EVENTS_URL);
}

const started = (extra: Record<string, unknown> = {}) => ({ type: "tool_started", tool: "bash", tool_call_id: "call_1", ...extra });

describe("POST /v1/programs/{id}/events: validation", () => {
  const cases: { name: string; body: unknown; param: string | null; code?: string }[] = [
    { name: "malformed JSON", body: '{"type": ', param: null, code: "invalid_json" },
    { name: "an unknown type", body: { type: "tool_paused" }, param: "type" },
    { name: "no type", body: { tool: "bash" }, param: "type" },
    { name: "a tool name that is not a string", body: started({ tool: 7 }), param: "tool" },
    { name: "an empty tool call id", body: started({ tool_call_id: "" }), param: "tool_call_id" },
    { name: "a bad thread name", body: started({ thread: "a b" }), param: "thread" },
    { name: "a negative expected duration", body: started({ expected_duration_ms: -5 }), param: "expected_duration_ms" },
    { name: "a deadline in seconds", body: started({ deadline: 1_700_000_000 }), param: "deadline" },
    { name: "a deadline without a time zone", body: started({ deadline: "2030-01-01T00:00:00" }), param: "deadline" },
    { name: "arguments that are not a string", body: started({ arguments: { command: "ls" } }), param: "arguments" },
    { name: "a hint on tool_finished", body: { type: "tool_finished", expected_duration_ms: 5 }, param: "expected_duration_ms" },
    { name: "an unknown field", body: started({ duration: 5 }), param: "duration" },
    { name: "an empty batch", body: { events: [] }, param: "events" },
    { name: "a bad event inside a batch", body: { events: [started(), started({ expected_duration_ms: "soon" })] }, param: "events.1.expected_duration_ms" },
    {
      name: "a batch over the cap",
      body: { events: Array.from({ length: MAX_TOOL_EVENTS_PER_BATCH + 1 }, (_, i) => started({ tool_call_id: `c${i}` })) },
      param: "events",
    },
  ];

  for (const c of cases) {
    it(`refuses ${c.name} with 400, recording and forwarding nothing`, async () => {
      const seen = mockEventsPool(() => new Response(null, { status: 202 }));
      const tenant = await newTenant();
      const programId = await newProgram(tenant);
      const error = await expectOpenAIError(await sendEvents(tenant, programId, c.body), 400, "invalid_request_error");
      expect(error.error.param).toBe(c.param);
      if (c.code) expect(error.error.code).toBe(c.code);
      await drain();
      expect(eventBatches(seen)).toEqual([]);
      expect((await toolsOf(tenant, programId)).events).toEqual({ tool_started: 0, tool_finished: 0 });
    });
  }

  it("refuses a malformed program ID with 400", async () => {
    const tenant = await newTenant();
    const error = await expectOpenAIError(await sendEvents(tenant, "prog_!", started()), 400);
    expect(error.error).toMatchObject({ code: "invalid_program_id", param: "program_id" });
  });
});

describe("POST /v1/programs/{id}/events: ownership and status", () => {
  it("answers another tenant's program exactly like an unknown one, and forwards nothing", async () => {
    const seen = mockEventsPool(() => new Response(null, { status: 202 }));
    const owner = await newTenant();
    const stranger = await newTenant();
    const programId = await newProgram(owner);
    const unknownId = "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ";
    const foreign = await sendEvents(stranger, programId, started());
    const unknown = await sendEvents(stranger, unknownId, started());
    expect(foreign.status).toBe(404);
    expect(await foreign.text()).toBe((await unknown.text()).replaceAll(unknownId, programId));
    await drain();
    expect(eventBatches(seen)).toEqual([]);
    expect((await toolsOf(owner, programId)).events.tool_started).toBe(0);
  });

  it("refuses events for an ended program with 409", async () => {
    const seen = mockEventsPool(() => new Response(null, { status: 202 }));
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    expect((await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" })).status).toBe(200);
    const error = await expectOpenAIError(await sendEvents(tenant, programId, started()), 409);
    expect(error.error.code).toBe("program_ended");
    await drain();
    expect(eventBatches(seen)).toEqual([]);
  });
});

describe("POST /v1/programs/{id}/events: forwarding to the pool", () => {
  it("answers 202 and forwards the normalised batch, signed like a call, from waitUntil", async () => {
    const seen = mockEventsPool(() => new Response(JSON.stringify({ accepted: 2 }), { status: 202 }));
    const tenant = await newTenant(2);
    const programId = await newProgram(tenant);
    const deadline = "2030-01-01T00:00:10.000Z";
    const res = await sendEvents(tenant, programId, {
      events: [
        started({ expected_duration_ms: 1_500, deadline, arguments: '{"command":"sleep 2 && make"}' }),
        { type: "tool_finished", tool_call_id: "call_0", thread: "side" },
      ],
    });
    expect(res.status).toBe(202);
    expect(res.headers.get(Header.program)).toBe(programId);
    const answer = (await res.json()) as { object: string; program_id: string; accepted: number; tools: ToolsView };
    expect(answer).toMatchObject({ object: "program.tool_events", program_id: programId, accepted: 2 });
    expect(answer.tools.in_flight).toEqual([
      expect.objectContaining({ tool: "bash", tool_call_id: "call_1", thread: "main", expected_duration_ms: 1_500, deadline: Date.parse(deadline) }),
    ]);

    await drain();
    const [forwarded, ...rest] = eventBatches(seen);
    expect(rest).toEqual([]);
    expect(forwarded?.request.method).toBe("POST");
    const window = { now: Date.now(), windowMs: 30_000 };
    expect(forwarded!.request.headers.get(Header.keyId)).toBe("default");
    const verified = await verifyForward(POOL_KEYS, EVENTS_ROUTE, forwarded!.request.headers, forwarded!.body, window);
    expect(verified.ok).toBe(true);
    // Bound to the route: a batch's signature does not pass as a call's.
    expect((await verifyForward(POOL_KEYS, CALL_ROUTE, forwarded!.request.headers, forwarded!.body, window)).ok).toBe(false);
    if (!verified.ok) return;
    expect(verified.fields).toMatchObject({ tenant: tenant.id, program: programId, thread: "main", serviceMs: 0, pathMs: 0, waitMs: 0, engine: "", weight: 2 });
    expect(verified.fields.call).toMatch(/^evt_[0-9A-Za-z]{24}$/);
    const batch = ToolEventBatch.parse(JSON.parse(new TextDecoder().decode(forwarded!.body)));
    expect(batch.events).toEqual([
      { type: "tool_started", tool: "bash", tool_call_id: "call_1", thread: "main", expected_duration_ms: 1_500, deadline: Date.parse(deadline), arguments: '{"command":"sleep 2 && make"}' },
      { type: "tool_finished", tool_call_id: "call_0", thread: "side" },
    ]);

    // A tampered batch does not verify: the signature covers the body.
    const tampered = JSON.stringify({ events: [started({ expected_duration_ms: 1 })] });
    expect((await verifyForward(POOL_KEYS, EVENTS_ROUTE, forwarded!.request.headers, tampered, window)).ok).toBe(false);
  });

  it("gives every batch its own ID", async () => {
    const seen = mockEventsPool(() => new Response(null, { status: 202 }));
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    for (let i = 0; i < 3; i++) expect((await sendEvents(tenant, programId, started({ tool_call_id: `c${i}` }))).status).toBe(202);
    await drain();
    const ids = eventBatches(seen).map((f) => f.request.headers.get(Header.call));
    expect(new Set(ids).size).toBe(3);
  });

  it("still answers 202 when the pool refuses or cannot be reached (events are hints)", async () => {
    const errors = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const tenant = await newTenant();
    mockEventsPool(() => new Response("nope", { status: 500 }));
    const programId = await newProgram(tenant);
    expect((await sendEvents(tenant, programId, started())).status).toBe(202);
    await drain();
    vi.spyOn(globalThis, "fetch").mockRejectedValue(new TypeError("connection refused"));
    expect((await sendEvents(tenant, programId, { type: "tool_finished", tool_call_id: "call_1" })).status).toBe(202);
    await drain();
    expect(errors).toHaveBeenCalledTimes(2);
    expect((await toolsOf(tenant, programId)).events).toEqual({ tool_started: 1, tool_finished: 1 });
  });
});

describe("tool state in the ProgramSession", () => {
  it("tracks runs in flight per thread, matches finishes, and shows it on GET", async () => {
    mockEventsPool(() => new Response(null, { status: 202 }));
    const clock = frozenClock();
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const t0 = clock.now();
    await sendEvents(tenant, programId, {
      events: [
        started({ tool_call_id: "a", tool: "bash" }),
        started({ tool_call_id: "b", tool: "grep", thread: "side" }),
        { type: "tool_started", tool: "web" },
      ],
    });
    clock.advance(2_000);
    // By id (on any thread), then by tool name on the thread.
    await sendEvents(tenant, programId, { events: [{ type: "tool_finished", tool_call_id: "b" }, { type: "tool_finished", tool: "web" }] });
    const tools = await toolsOf(tenant, programId);
    expect(tools.in_flight.map((r) => [r.tool_call_id, r.tool, r.thread, r.started_at])).toEqual([["a", "bash", "main", t0]]);
    expect(tools).toMatchObject({ last_started_at: t0, last_finished_at: t0 + 2_000, events: { tool_started: 3, tool_finished: 2 } });
    expect(tools.threads).toEqual([
      { name: "main", last_started_at: t0, last_finished_at: t0 + 2_000 },
      { name: "side", last_started_at: t0, last_finished_at: t0 + 2_000 },
    ]);
    const state = (await (await tenantFetch(tenant, `/v1/programs/${programId}`)).json()) as { last_activity_at: number };
    expect(state.last_activity_at).toBe(t0 + 2_000);
  });

  it("ends a thread's runs when the agent calls the model again on that thread", async () => {
    mockEventsPool(({ request }) => (request.url === POOL_EVENTS_URL ? new Response(null, { status: 202 }) : poolJson()));
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    await sendEvents(tenant, programId, { events: [started({ tool_call_id: "a" }), started({ tool_call_id: "b", thread: "side" })] });
    expect((await chat(tenant, chatBody(), { [Header.program]: programId })).status).toBe(200);
    await drain();
    expect((await toolsOf(tenant, programId)).in_flight.map((r) => r.tool_call_id)).toEqual(["b"]);
  });

  it("keeps at most MAX_TOOL_RUNS runs in flight, dropping the oldest", async () => {
    mockEventsPool(() => new Response(null, { status: 202 }));
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const batch = (from: number) => ({ events: Array.from({ length: MAX_TOOL_EVENTS_PER_BATCH }, (_, i) => started({ tool_call_id: `c${from + i}` })) });
    await sendEvents(tenant, programId, batch(0));
    await sendEvents(tenant, programId, batch(MAX_TOOL_EVENTS_PER_BATCH));
    const tools = await toolsOf(tenant, programId);
    expect(tools.in_flight).toHaveLength(MAX_TOOL_RUNS);
    expect(tools.in_flight[0]?.tool_call_id).toBe(`c${2 * MAX_TOOL_EVENTS_PER_BATCH - MAX_TOOL_RUNS}`);
    expect(tools.events.tool_started).toBe(2 * MAX_TOOL_EVENTS_PER_BATCH);
  });

  it("caps events per program per minute: a batch over the cap is refused whole with 429 and Retry-After", async () => {
    const seen = mockEventsPool(() => new Response(null, { status: 202 }));
    const clock = frozenClock();
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    const full = { events: Array.from({ length: MAX_TOOL_EVENTS_PER_BATCH }, (_, i) => started({ tool_call_id: `c${i}` })) };
    const fits = Math.floor(TOOL_EVENTS_PER_MINUTE / MAX_TOOL_EVENTS_PER_BATCH);
    for (let i = 0; i < fits; i++) expect((await sendEvents(tenant, programId, full)).status).toBe(202);
    const refused = await sendEvents(tenant, programId, full);
    const error = await expectOpenAIError(refused, 429, "rate_limit_error");
    expect(error.error.code).toBe("tool_events_rate_exceeded");
    expect(Number(refused.headers.get(RateLimitHeader.retryAfter))).toBeGreaterThanOrEqual(1);
    await drain();
    expect(eventBatches(seen)).toHaveLength(fits);
    expect((await toolsOf(tenant, programId)).events.tool_started).toBe(fits * MAX_TOOL_EVENTS_PER_BATCH);
    // The bucket refills at the per-minute rate.
    clock.advance(60_000);
    expect((await sendEvents(tenant, programId, full)).status).toBe(202);
  });

  it("clears runs in flight when the program ends", async () => {
    mockEventsPool(() => new Response(null, { status: 202 }));
    const tenant = await newTenant();
    const programId = await newProgram(tenant);
    await sendEvents(tenant, programId, started());
    const ended = (await (await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" })).json()) as { tools: ToolsView };
    expect(ended.tools).toMatchObject({ in_flight: [], events: { tool_started: 1 } });
  });
});
