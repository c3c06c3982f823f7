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
    const broken = { ...env, POOL_URL: "not a url", POOL_SIGNING_SECRET: "short" };
    for (const path of ["/v1/programs", "/admin/tenants"]) {
      logged.mockClear();
      const res = await edge(path, { method: "POST", headers: { authorization: "Bearer x" } }, broken);
      const body = await expectOpenAIError(res, 500, "server_error");
      expect(body.error.code).toBe("edge_misconfigured");
      for (const leak of ["POOL_URL", "POOL_SIGNING_SECRET", "not a url", "short"]) expect(body.error.message).not.toContain(leak);
      expect(logged).toHaveBeenCalledOnce();
      const line = String(logged.mock.calls[0]?.[0]);
      expect(line).toContain("POOL_URL");
      expect(line).toContain("POOL_SIGNING_SECRET");
      expect(line).not.toContain("not a url");
    }
    logged.mockRestore();
  });

  it("names a malformed POOL_SIGNING_KEY_ID in the log", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const res = await edge("/v1/programs", { method: "POST", headers: { authorization: "Bearer x" } }, { ...env, POOL_SIGNING_KEY_ID: "no spaces" });
    expect((await expectOpenAIError(res, 500, "server_error")).error.code).toBe("edge_misconfigured");
    expect(String(logged.mock.calls[0]?.[0])).toContain("POOL_SIGNING_KEY_ID: key id: 1–64 of letters, digits, . _ -");
    logged.mockRestore();
  });
});
