import { listDurableObjectIds } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Header } from "../../src/protocol/headers";
import { chat, chatBody, drain, expectOpenAIError, mockPool, newTenant, poolJson, type TestTenant } from "./support";

const MAX_BODY_BYTES = Number(env.MAX_BODY_BYTES);

afterEach(() => {
  vi.restoreAllMocks();
});

/** Everything a refused request must leave untouched. */
async function footprint(tenant: TestTenant) {
  const count = async (table: string) =>
    (await env.DB.prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE tenant_id = ?`).bind(tenant.id).first<{ n: number }>())?.n;
  return {
    programs: await count("programs"),
    usage: await count("usage"),
    objects: (await listDurableObjectIds(env.PROGRAM_SESSION)).length,
  };
}

describe("bad chat bodies", () => {
  it("(control) a valid request does leave a footprint, so the checks below can fail", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    const before = await footprint(tenant);
    expect((await chat(tenant)).status).toBe(200);
    await drain();
    const after = await footprint(tenant);
    expect(after.programs).toBe((before.programs ?? 0) + 1);
    expect(after.usage).toBe((before.usage ?? 0) + 1);
    expect(after.objects).toBe(before.objects + 1);
  });

  const cases: { name: string; body: BodyInit; status: number; param?: string; code?: string }[] = [
    { name: "malformed JSON", body: '{"model": "m", "messages": [', status: 400, code: "invalid_json" },
    { name: "an empty body", body: "", status: 400, code: "invalid_json" },
    { name: "invalid UTF-8", body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), status: 400, code: "invalid_json" },
    { name: "JSON that is not an object", body: "[1,2]", status: 400, code: "invalid_request" },
    { name: "missing messages", body: JSON.stringify({ model: "m" }), status: 400, param: "messages" },
    { name: "empty messages", body: chatBody({ messages: [] }), status: 400, param: "messages" },
    { name: "a wrong role", body: chatBody({ messages: [{ role: "robot", content: "x" }] }), status: 400, param: "messages.0.role" },
    { name: "a wrong type", body: chatBody({ temperature: "hot" }), status: 400, param: "temperature" },
    { name: "stream not a boolean", body: chatBody({ stream: "yes" }), status: 400, param: "stream" },
    { name: "missing model", body: JSON.stringify({ messages: [{ role: "user", content: "x" }] }), status: 400, param: "model" },
  ];

  for (const c of cases) {
    it(`refuses ${c.name} with ${c.status}, changing nothing`, async () => {
      const pool = mockPool(() => poolJson());
      const tenant = await newTenant();
      const before = await footprint(tenant);
      const res = await chat(tenant, c.body as string);
      const error = await expectOpenAIError(res, c.status, "invalid_request_error");
      if (c.param) expect(error.error.param).toBe(c.param);
      if (c.code) expect(error.error.code).toBe(c.code);
      expect(res.headers.get(Header.program)).toBeNull();
      await drain();
      expect(await footprint(tenant)).toEqual(before);
      expect(pool).toHaveLength(0);
    });
  }

  it("refuses an oversized body by Content-Length with 413, changing nothing", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const before = await footprint(tenant);
    const big = chatBody({ messages: [{ role: "user", content: "x".repeat(MAX_BODY_BYTES) }] });
    const res = await chat(tenant, big);
    expect((await expectOpenAIError(res, 413, "invalid_request_error")).error.code).toBe("request_too_large");
    await drain();
    expect(await footprint(tenant)).toEqual(before);
    expect(pool).toHaveLength(0);
  });

  it("refuses an oversized streamed body (no Content-Length) by counting its bytes", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const before = await footprint(tenant);
    const piece = new TextEncoder().encode("x".repeat(64 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent > MAX_BODY_BYTES * 2) return controller.close();
        sent += piece.byteLength;
        controller.enqueue(piece);
      },
    });
    const res = await chat(tenant, undefined, {}, { body, duplex: "half" } as RequestInit);
    expect((await expectOpenAIError(res, 413)).error.code).toBe("request_too_large");
    expect(sent).toBeLessThan(MAX_BODY_BYTES * 2); // cut off, not read to the end
    await drain();
    expect(await footprint(tenant)).toEqual(before);
    expect(pool).toHaveLength(0);
  });

  it("refuses bad thread headers before touching any state", async () => {
    const pool = mockPool(() => poolJson());
    const tenant = await newTenant();
    const before = await footprint(tenant);
    const res = await chat(tenant, chatBody(), { [Header.thread]: "x".repeat(65) });
    expect((await expectOpenAIError(res, 400)).error.param).toBe(Header.thread);
    const parent = await chat(tenant, chatBody(), { [Header.parentThread]: "bad name!" });
    expect((await expectOpenAIError(parent, 400)).error.param).toBe(Header.parentThread);
    await drain();
    expect(await footprint(tenant)).toEqual(before);
    expect(pool).toHaveLength(0);
  });
});
