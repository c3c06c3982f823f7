import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ADMIN_TOKEN, adminFetch, edge, expectOpenAIError, newTenant } from "./support";

describe("admin API", () => {
  it("refuses a missing or wrong admin token with 401 in OpenAI's shape", async () => {
    const missing = await edge("/admin/tenants");
    const missingBody = await expectOpenAIError(missing, 401, "authentication_error");
    expect(missingBody.error.code).toBe("invalid_admin_token");

    const wrong = await edge("/admin/tenants", { headers: { authorization: `Bearer ${ADMIN_TOKEN}X` } });
    await expectOpenAIError(wrong, 401, "authentication_error");

    // A tenant key is not an admin token.
    const tenant = await newTenant();
    const asTenant = await edge("/admin/tenants", { headers: { authorization: `Bearer ${tenant.key}` } });
    await expectOpenAIError(asTenant, 401, "authentication_error");
  });

  it("is disabled, with a 403 that names no variable, when ADMIN_TOKEN is unset", async () => {
    const res = await edge(
      "/admin/tenants",
      { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } },
      { ...env, ADMIN_TOKEN: undefined },
    );
    const body = await expectOpenAIError(res, 403, "permission_error");
    expect(body.error.code).toBe("admin_disabled");
    expect(body.error.message).not.toMatch(/ADMIN_TOKEN/);
  });

  it("creates and lists tenants, weight defaulting to 1", async () => {
    const created = await adminFetch("/admin/tenants", { method: "POST", body: JSON.stringify({ name: "Acme" }) });
    expect(created.status).toBe(201);
    const tenant = (await created.json()) as Record<string, unknown>;
    expect(tenant).toMatchObject({ object: "tenant", name: "Acme", weight: 1 });
    expect(tenant.id).toMatch(/^ten_/);

    const heavy = await adminFetch("/admin/tenants", { method: "POST", body: JSON.stringify({ name: "Big", weight: 4 }) });
    expect(((await heavy.json()) as { weight: number }).weight).toBe(4);

    const list = (await (await adminFetch("/admin/tenants")).json()) as { object: string; data: { id: string }[] };
    expect(list.object).toBe("list");
    expect(list.data.map((t) => t.id)).toContain(tenant.id);
  });

  it("validates tenant bodies with 400 naming the field", async () => {
    const missingName = await adminFetch("/admin/tenants", { method: "POST", body: JSON.stringify({}) });
    expect((await expectOpenAIError(missingName, 400, "invalid_request_error")).error.param).toBe("name");

    const badWeight = await adminFetch("/admin/tenants", {
      method: "POST",
      body: JSON.stringify({ name: "x", weight: "heavy" }),
    });
    expect((await expectOpenAIError(badWeight, 400)).error.param).toBe("weight");

    const negative = await adminFetch("/admin/tenants", { method: "POST", body: JSON.stringify({ name: "x", weight: -1 }) });
    expect((await expectOpenAIError(negative, 400)).error.param).toBe("weight");

    const malformed = await adminFetch("/admin/tenants", { method: "POST", body: "{name:" });
    expect((await expectOpenAIError(malformed, 400)).error.code).toBe("invalid_json");
  });

  it("shows a key once, stores only its hash and prefix, and lists prefixes only", async () => {
    const created = (await (await adminFetch("/admin/tenants", {
      method: "POST",
      body: JSON.stringify({ name: "Keys Inc" }),
    })).json()) as { id: string };
    const keyRes = await adminFetch(`/admin/tenants/${created.id}/keys`, {
      method: "POST",
      body: JSON.stringify({ name: "ci" }),
    });
    expect(keyRes.status).toBe(201);
    const key = (await keyRes.json()) as { id: string; key: string; prefix: string; name: string };
    // The key names its tenant, so the edge goes straight to the tenant's limiter.
    expect(key.key).toBe(`${key.key.slice(0, 44)}_${created.id}`);
    expect(key.key).toMatch(/^agx_[0-9A-Za-z]{40}_ten_[0-9A-Za-z]{16}$/);
    expect(key.prefix).toBe(key.key.slice(0, 12));
    expect(key.name).toBe("ci");

    const stored = await env.DB.prepare("SELECT * FROM api_keys WHERE id = ?").bind(key.id).first<Record<string, unknown>>();
    expect(JSON.stringify(stored)).not.toContain(key.key);
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key.key));
    const hex = Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
    expect(stored?.key_hash).toBe(hex);

    const list = (await (await adminFetch(`/admin/tenants/${created.id}/keys`)).json()) as {
      data: Record<string, unknown>[];
    };
    expect(list.data).toHaveLength(1);
    expect(list.data[0]).toMatchObject({ id: key.id, prefix: key.prefix, revoked_at: null });
    expect(JSON.stringify(list)).not.toContain(key.key);
    expect(list.data[0]).not.toHaveProperty("key_hash");
  });

  it("answers 404 for keys of an unknown tenant and for revoking an unknown key", async () => {
    await expectOpenAIError(await adminFetch("/admin/tenants/ten_nope/keys", { method: "POST" }), 404, "not_found_error");
    await expectOpenAIError(await adminFetch("/admin/tenants/ten_nope/keys"), 404, "not_found_error");
    await expectOpenAIError(await adminFetch("/admin/keys/key_nope", { method: "DELETE" }), 404, "not_found_error");
  });

  it("revokes a key, keeping the first revocation time when revoked again", async () => {
    const tenant = await newTenant();
    const first = (await (await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).json()) as {
      revoked_at: number;
    };
    expect(first.revoked_at).toEqual(expect.any(Number));
    const again = (await (await adminFetch(`/admin/keys/${tenant.keyId}`, { method: "DELETE" })).json()) as {
      revoked_at: number;
    };
    expect(again.revoked_at).toBe(first.revoked_at);
  });
});
