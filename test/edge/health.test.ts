import { exports } from "cloudflare:workers";
import { expect, it } from "vitest";

it("answers health", async () => {
  const res = await exports.default.fetch("http://edge/health");
  expect(res.status).toBe(200);
});
