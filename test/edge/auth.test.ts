import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { adminFetch, chat, drain, edge, expectOpenAIError, frozenClock, mockPool, newTenant, poolJson, tenantFetch } from "./support";

afterEach(() => {
  vi.restoreAllMocks();
});

describe("tenant authentication", () => {
  it("answers a missing, malformed or unknown key with the same 401 shape", async () => {
    const pool = mockPool(() => poolJson());
    const missing = await edge("/v1/chat/completions", { method: "POST", body: "{}" });
    const missingBody = await expectOpenAIError(missing, 401, "authentication_error");
    expect(missingBody.error.code).toBe("invalid_api_key");

    const notBearer = await edge("/v1/programs", { method: "POST", headers: { authorization: "Basic Zm9vOmJhcg==" } });
    expect((await expectOpenAIError(notBearer, 401, "authentication_error")).error.code).toBe("invalid_api_key");

    const malformed = await edge("/v1/programs", { method: "POST", headers: { authorization: "Bearer sk-123" } });
    const malformedBody = await expectOpenAIError(malformed, 401, "authentication_error");

    const unknownKey = `agx_${"A".repeat(40)}`;
    const unknown = await edge("/v1/programs", { method: "POST", headers: { authorization: `Bearer ${unknownKey}` } });
    const unknownBody = await expectOpenAIError(unknown, 401, "authentication_error");
    expect(unknownBody).toEqual(malformedBody);
    expect(pool).toHaveLength(0);
  });

  it("stops accepting a key the moment it is revoked, with the same answer as a wrong key", async () => {
    mockPool(() => poolJson());
    const tenant = await newTenant();
    expect((await chat(tenant)).status).toBe(200);
    await drain();

    expect((await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).status).toBe(200);
    const revoked = await chat(tenant);
    const revokedBody = await expectOpenAIError(revoked, 401, "authentication_error");
    expect(revokedBody.error.code).toBe("invalid_api_key");

    const wrong = await chat({ ...tenant, key: `agx_${"B".repeat(40)}` });
    expect(await expectOpenAIError(wrong, 401)).toEqual(revokedBody);

    // Other keys of the tenant keep working.
    const other = (await (await adminFetch(`/admin/tenants/${tenant.id}/keys`, { method: "POST" })).json()) as {
      key: string;
    };
    expect((await tenantFetch({ ...tenant, key: other.key }, "/v1/programs", { method: "POST" })).status).toBe(201);
    await drain();
  });

  it("records last_used_at after a request, at most once a minute", async () => {
    const clock = frozenClock();
    const tenant = await newTenant();
    const lastUsed = async () =>
      (await env.DB.prepare("SELECT last_used_at FROM api_keys WHERE id = ?").bind(tenant.keyId).first<{
        last_used_at: number | null;
      }>())?.last_used_at;
    expect(await lastUsed()).toBeNull();
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    const first = await lastUsed();
    expect(first).toBe(clock.now());

    clock.advance(10_000);
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    expect(await lastUsed()).toBe(first); // untouched: used within the minute

    clock.advance(60_000);
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    expect(await lastUsed()).toBe(clock.now());
  });
});
