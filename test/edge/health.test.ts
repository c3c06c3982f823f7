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

  it("names the misconfigured var (never its value) with 500", async () => {
    const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
    const broken = { ...env, POOL_URL: "not a url", POOL_SIGNING_SECRET: "short" };
    const res = await edge("/v1/programs", { method: "POST", headers: { authorization: "Bearer x" } }, broken);
    const body = await expectOpenAIError(res, 500, "server_error");
    expect(body.error.code).toBe("edge_misconfigured");
    expect(body.error.message).toContain("POOL_URL");
    expect(body.error.message).toContain("POOL_SIGNING_SECRET");
    expect(body.error.message).not.toContain("not a url");
    expect(logged).toHaveBeenCalledOnce();
    logged.mockRestore();
  });
});
