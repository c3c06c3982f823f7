import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import {
  chat,
  chatBody,
  drain,
  expectOpenAIError,
  mockPool,
  newTenant,
  poolJson,
  programHeader,
  programRow,
  tenantFetch,
} from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("programs API", () => {
  it("creates a program with its ID in the header and the body", async () => {
    const tenant = await newTenant();
    const res = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    expect(res.status).toBe(201);
    const program = (await res.json()) as Record<string, unknown>;
    expect(program).toMatchObject({
      object: "program",
      status: "active",
      service_ms: 0,
      path_ms: 0,
      wait_ms: 0,
      engine: null,
      in_flight: 0,
      totals: { calls: 0, prompt_tokens: 0, cached_tokens: 0, completion_tokens: 0 },
      threads: [{ name: "main", parent: null, in_flight: 0, calls: 0, service_ms: 0, context_generation: 0 }],
    });
    expect(programHeader(res)).toBe(program.id);
    expect(await programRow(program.id as string)).toMatchObject({ tenant_id: tenant.id, status: "active" });
  });

  it("answers another tenant's program exactly like an unknown one, on every route", async () => {
    mockPool(() => poolJson());
    const owner = await newTenant();
    const stranger = await newTenant();
    const created = await tenantFetch(owner, "/v1/programs", { method: "POST" });
    const programId = programHeader(created)!;
    const unknownId = "prog_ZZZZZZZZZZZZZZZZZZZZZZZZ";

    const snapshot = async (res: Response) => ({ status: res.status, body: await res.text() });
    const swap = (s: { status: number; body: string }) => ({ ...s, body: s.body.replaceAll(unknownId, programId) });

    for (const method of ["GET", "DELETE"]) {
      const foreign = await snapshot(await tenantFetch(stranger, `/v1/programs/${programId}`, { method }));
      const unknown = await snapshot(await tenantFetch(stranger, `/v1/programs/${unknownId}`, { method }));
      expect(foreign.status).toBe(404);
      expect(foreign).toEqual(swap(unknown));
    }
    const foreignChat = await chat(stranger, chatBody(), { [Header.program]: programId });
    expect(foreignChat.headers.get(Header.program)).toBeNull();
    const foreign = await snapshot(foreignChat);
    const unknown = await snapshot(await chat(stranger, chatBody(), { [Header.program]: unknownId }));
    expect(foreign.status).toBe(404);
    expect(foreign).toEqual(swap(unknown));
    expect(JSON.parse(foreign.body)).toMatchObject({ error: { type: "not_found_error", code: "program_not_found" } });
    await drain();

    // The owner's program is untouched by all of that.
    const owned = (await (await tenantFetch(owner, `/v1/programs/${programId}`)).json()) as Record<string, unknown>;
    expect(owned).toMatchObject({ status: "active", totals: expect.objectContaining({ calls: 0 }) });
  });

  it("refuses a malformed program ID with 400", async () => {
    const tenant = await newTenant();
    const res = await tenantFetch(tenant, "/v1/programs/not-a-program");
    expect((await expectOpenAIError(res, 400)).error.code).toBe("invalid_program_id");
    const viaHeader = await chat(tenant, chatBody(), { [Header.program]: "prog_!" });
    expect((await expectOpenAIError(viaHeader, 400)).error.param).toBe(Header.program);
  });

  it("ends a program: final summary in D1, status ended, later calls refused, DELETE idempotent", async () => {
    mockPool(() => poolJson({ usage: { prompt: 10, completion: 5, cached: 2 }, stats: { engine: "e9", queueMs: 40, serviceMs: 300 } }));
    const tenant = await newTenant();
    const first = await chat(tenant, chatBody(), { [Header.thread]: "t1" });
    const programId = programHeader(first)!;
    await drain();
    await chat(tenant, chatBody(), { [Header.program]: programId, [Header.thread]: "t2" });
    await drain();

    const ended = await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" });
    expect(ended.status).toBe(200);
    const summary = (await ended.json()) as Record<string, unknown>;
    expect(summary).toMatchObject({
      status: "ended",
      service_ms: 600,
      path_ms: 600,
      wait_ms: 80,
      engine: "e9",
      totals: { calls: 2, prompt_tokens: 20, cached_tokens: 4, completion_tokens: 10 },
      threads: [],
    });
    expect(summary.ended_at).toEqual(expect.any(Number));
    expect(await programRow(programId)).toMatchObject({
      status: "ended",
      calls: 2,
      prompt_tokens: 20,
      cached_tokens: 4,
      completion_tokens: 10,
      service_ms: 600,
      path_ms: 600,
      wait_ms: 80,
      ended_at: summary.ended_at,
    });

    const again = await tenantFetch(tenant, `/v1/programs/${programId}`, { method: "DELETE" });
    expect(await again.json()).toEqual(summary);
    const get = await tenantFetch(tenant, `/v1/programs/${programId}`);
    expect(await get.json()).toEqual(summary);

    const late = await chat(tenant, chatBody(), { [Header.program]: programId });
    expect((await expectOpenAIError(late, 409)).error.code).toBe("program_ended");
  });
});
