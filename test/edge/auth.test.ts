import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { adminFetch, chat, drain, edge, expectOpenAIError, mockPool, newTenant, poolJson, tenantFetch } from "./support";

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
    const tenant = await newTenant();
    const lastUsed = async () =>
      (await env.DB.prepare("SELECT last_used_at FROM api_keys WHERE id = ?").bind(tenant.keyId).first<{
        last_used_at: number | null;
      }>())?.last_used_at;
    expect(await lastUsed()).toBeNull();
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    const first = await lastUsed();
    expect(first).toEqual(expect.any(Number));

    await env.DB.prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?").bind(Date.now() - 10_000, tenant.keyId).run();
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    const recent = await lastUsed();
    expect(Date.now() - (recent ?? 0)).toBeGreaterThanOrEqual(10_000); // untouched: used within the minute

    await env.DB.prepare("UPDATE api_keys SET last_used_at = ? WHERE id = ?").bind(Date.now() - 120_000, tenant.keyId).run();
    await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    await drain();
    expect(Date.now() - ((await lastUsed()) ?? 0)).toBeLessThan(60_000);
  });
});
