import { env, exports } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { edge, expectOpenAIError } from "./support";

describe("edge basics", () => {
  it("answers health through the deployed entry point", async () => {
    const res = await exports.default.fetch("http://edge/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it("answers unknown routes with 404 in OpenAI's shape", async () => {
    const body = await expectOpenAIError(await edge("/v2/nothing"), 404, "not_found_error");
    expect(body.error.code).toBe("unknown_route");
  });

  it("answers a generic 500 to the caller and names the misconfigured var (never its value) in the log only", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const broken = { ...env, REGION_ORDER: "not json", POOL_SIGNING_SECRET: "short" };
    for (const path of ["/v1/programs", "/admin/tenants"]) {
      logged.mockClear();
      const res = await edge(path, { method: "POST", headers: { authorization: "Bearer x" } }, broken);
      const body = await expectOpenAIError(res, 500, "server_error");
      expect(body.error.code).toBe("edge_misconfigured");
      for (const leak of ["REGION_ORDER", "POOL_SIGNING_SECRET", "not json", "short"]) expect(body.error.message).not.toContain(leak);
      expect(logged).toHaveBeenCalledOnce();
      const line = String(logged.mock.calls[0]?.[0]);
      expect(line).toContain("REGION_ORDER: is not valid JSON");
      expect(line).toContain("POOL_SIGNING_SECRET");
      expect(line).not.toContain("not json");
    }
    logged.mockRestore();
  });

  it("names a malformed POOL_SIGNING_KEY_ID in the log", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const res = await edge("/v1/programs", { method: "POST", headers: { authorization: "Bearer x" } }, { ...env, POOL_SIGNING_KEY_ID: "no spaces" });
    expect((await expectOpenAIError(res, 500, "server_error")).error.code).toBe("edge_misconfigured");
    expect(String(logged.mock.calls[0]?.[0])).toContain("POOL_SIGNING_KEY_ID: key id: 1–64 of letters, digits, . _ -");
    logged.mockClear();
    const keys = { ...env, POOL_SIGNING_KEYS: JSON.stringify({ "bad id": "a-secret-of-enough-length", ok: "short" }) };
    await expectOpenAIError(await edge("/v1/programs", { method: "POST" }, keys), 500, "server_error");
    const line = String(logged.mock.calls[0]?.[0]);
    expect(line).toContain("POOL_SIGNING_KEYS");
    expect(line).not.toContain("a-secret-of-enough-length");
    expect(line).not.toContain("short");
    logged.mockClear();
    const none = { ...env, POOL_SIGNING_SECRET: "" };
    await expectOpenAIError(await edge("/v1/programs", { method: "POST" }, none), 500, "server_error");
    expect(String(logged.mock.calls[0]?.[0])).toContain("POOL_SIGNING_KEYS: no signing key");
    logged.mockRestore();
  });
});
