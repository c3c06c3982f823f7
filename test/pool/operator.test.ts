import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { PoolHealthStatus } from "../../src/pool/app.js";
import { loadPoolConfig, parsePoolConfig, PoolConfigError, type PoolConfigInput } from "../../src/pool/config.js";
import { operatorAccess } from "../../src/pool/operator-auth.js";
import { type PoolHandle, startPool } from "../../src/pool/server.js";
import { OpenAIErrorBody } from "../../src/protocol/errors.js";
import { type FakeEngine, startFakeEngine } from "./fake-engine.js";
import { OPERATOR_TOKEN, operatorGet, SECRET, testConfig, waitFor } from "./helpers.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(extra: Partial<PoolConfigInput> = {}): Promise<{ engine: FakeEngine; pool: PoolHandle }> {
  const engine = await startFakeEngine();
  cleanups.push(() => engine.close());
  const pool = await startPool(testConfig({ engines: [{ id: "e1", url: engine.url }], ...extra }));
  cleanups.push(() => pool.close());
  return { engine, pool };
}

const get = (pool: PoolHandle, path: string, authorization?: string) =>
  fetch(`${pool.url}${path}`, authorization === undefined ? {} : { headers: { authorization } });

async function expectError(res: Response, status: number, code: string): Promise<void> {
  expect(res.status).toBe(status);
  expect(OpenAIErrorBody.parse(await res.json()).error.code).toBe(code);
}

const OPERATOR_PATHS = ["/metrics", "/tao/programs/prog_someprogram01"];

describe("operator endpoints of the pool (real sockets)", () => {
  it("answers /metrics and /tao/* only to the operator token", async () => {
    const { pool } = await setup();
    const wrongSameLength = `${OPERATOR_TOKEN.slice(0, -1)}x`;
    for (const path of OPERATOR_PATHS) {
      const anonymous = await get(pool, path);
      expect(anonymous.headers.get("www-authenticate")).toMatch(/^Bearer/);
      await expectError(anonymous, 401, "invalid_operator_token");
      await expectError(await get(pool, path, `Bearer ${wrongSameLength}`), 401, "invalid_operator_token");
      await expectError(await get(pool, path, `Bearer ${OPERATOR_TOKEN}x`), 401, "invalid_operator_token");
      await expectError(await get(pool, path, `Basic ${OPERATOR_TOKEN}`), 401, "invalid_operator_token");
      await expectError(await get(pool, path, OPERATOR_TOKEN), 401, "invalid_operator_token");
    }
    const metrics = await get(pool, "/metrics", `Bearer ${OPERATOR_TOKEN}`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain("agentix_pool_queue_depth");
    // Known to nobody yet, but the operator gets past the token to the route's own answer.
    await expectError(await get(pool, "/tao/programs/prog_someprogram01", `bearer ${OPERATOR_TOKEN}`), 404, "program_not_found");
  });

  it("tells anyone only ok or degraded on /health, and the operator the detail", async () => {
    const { engine, pool } = await setup({ unhealthyAfterFailures: 1 });
    const anonymous = await get(pool, "/health");
    expect(anonymous.status).toBe(200);
    expect(PoolHealthStatus.parse(await anonymous.json())).toEqual({ status: "ok" });
    const wrong = await get(pool, "/health", "Bearer not-the-operator-token-but-long-enough");
    expect(PoolHealthStatus.parse(await wrong.json())).toEqual({ status: "ok" });

    const detail = await operatorGet(pool.url, "/health");
    expect(await detail.json()).toMatchObject({ status: "ok", ok: true, queued: 0, running: 0, engines: [{ id: "e1", healthy: true }] });

    engine.setHealthy(false);
    await waitFor(() => !pool.dispatcher.hasHealthyEngine(), "engine marked unhealthy");
    const down = await get(pool, "/health");
    expect(down.status).toBe(503);
    expect(PoolHealthStatus.parse(await down.json())).toEqual({ status: "degraded" });
    expect(await (await operatorGet(pool.url, "/health")).json()).toMatchObject({ status: "degraded", engines: [{ id: "e1", healthy: false }] });
  });

  it("answers 403 on a pool with no operator token, whatever is presented", async () => {
    const { pool } = await setup({ operatorToken: undefined });
    expect(pool.config.operatorToken).toBeUndefined();
    for (const path of OPERATOR_PATHS) {
      await expectError(await get(pool, path), 403, "operator_endpoints_disabled");
      await expectError(await get(pool, path, `Bearer ${OPERATOR_TOKEN}`), 403, "operator_endpoints_disabled");
    }
    const health = await get(pool, "/health", `Bearer ${OPERATOR_TOKEN}`);
    expect(PoolHealthStatus.parse(await health.json())).toEqual({ status: "ok" });
  });
});

describe("operator token configuration", () => {
  const minimal = { signingSecret: SECRET, engines: [{ id: "e1", url: "http://127.0.0.1:8000" }] };

  it("requires at least 32 characters", () => {
    expect(() => parsePoolConfig({ ...minimal, operatorToken: "x".repeat(31) })).toThrow(PoolConfigError);
    expect(() => parsePoolConfig({ ...minimal, operatorToken: "x".repeat(31) })).toThrow(/operatorToken must be at least 32/);
    expect(parsePoolConfig({ ...minimal, operatorToken: "x".repeat(32) }).operatorToken).toBe("x".repeat(32));
  });

  it("takes AGENTIX_POOL_OPERATOR_TOKEN from the environment, over the file's", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "agentix-operator-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, "pool.json");
    await writeFile(file, JSON.stringify({ ...minimal, operatorToken: "f".repeat(40) }));
    expect((await loadPoolConfig({ path: file, env: {} })).operatorToken).toBe("f".repeat(40));
    expect((await loadPoolConfig({ path: file, env: { AGENTIX_POOL_OPERATOR_TOKEN: OPERATOR_TOKEN } })).operatorToken).toBe(OPERATOR_TOKEN);
    await expect(loadPoolConfig({ path: file, env: { AGENTIX_POOL_OPERATOR_TOKEN: "short" } })).rejects.toThrow(/operatorToken must be at least 32/);
  });

  it("compares the token whole: prefixes, extensions and other schemes are refused", () => {
    expect(operatorAccess(OPERATOR_TOKEN, `Bearer ${OPERATOR_TOKEN}`)).toBe("granted");
    expect(operatorAccess(OPERATOR_TOKEN, `Bearer ${OPERATOR_TOKEN.slice(0, 16)}`)).toBe("denied");
    expect(operatorAccess(OPERATOR_TOKEN, `Bearer ${OPERATOR_TOKEN} extra`)).toBe("denied");
    expect(operatorAccess(OPERATOR_TOKEN, null)).toBe("denied");
    expect(operatorAccess(undefined, `Bearer ${OPERATOR_TOKEN}`)).toBe("disabled");
  });
});
