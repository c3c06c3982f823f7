import { mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type AdminIo, runAdminCommand } from "../../src/cli/admin";

/*
 * `agentix admin` against a fake admin API on an ephemeral port: what the
 * CLI sends (method, path, auth, body) and what it prints and returns.
 */

interface Seen {
  method: string;
  url: string;
  authorization: string | undefined;
  body: unknown;
}

type Reply = { status: number; body: unknown; contentType?: string };

let server: Server;
let baseUrl: string;
let seen: Seen[] = [];
let reply: (req: Seen) => Reply = () => ({ status: 200, body: {} });

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text === "" ? undefined : JSON.parse(text);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    void readBody(req).then((body) => {
      const request: Seen = { method: req.method ?? "", url: req.url ?? "", authorization: req.headers.authorization, body };
      seen.push(request);
      const { status, body: out, contentType } = reply(request);
      res.writeHead(status, { "content-type": contentType ?? "application/json" });
      res.end(typeof out === "string" ? out : JSON.stringify(out));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

let cwd: string;
beforeEach(async () => {
  seen = [];
  cwd = await mkdtemp(path.join(os.tmpdir(), "agentix-admin-"));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function run(argv: string[], env: Record<string, string> = {}) {
  let stdout = "";
  let stderr = "";
  const io: AdminIo = {
    stdout: (t) => {
      stdout += t;
    },
    stderr: (t) => {
      stderr += t;
    },
    env: { AGENTIX_URL: baseUrl, AGENTIX_ADMIN_TOKEN: "tok-env", ...env },
    cwd,
  };
  const code = await runAdminCommand(argv, io);
  return { code, stdout, stderr };
}

const tenant = (over: Record<string, unknown> = {}) => ({
  id: "ten_1",
  object: "tenant",
  name: "Acme",
  plan: "free",
  weight: 1,
  created_at: Date.UTC(2031, 0, 2, 3, 4, 5),
  overrides: {},
  limits: { rpm: 60, tpm: 60_000, max_concurrent: 4, max_active_programs: 10, monthly_token_budget: null, weight: 1, default_max_tokens: 1024 },
  ...over,
});

const openAIError = (message: string, code: string) => ({ error: { message, type: "invalid_request_error", code, param: null } });

describe("agentix admin tenants", () => {
  it("creates a tenant: POST with the admin token, a table by default, the edge's JSON with --json", async () => {
    reply = () => ({ status: 201, body: tenant({ plan: "pro" }) });
    const table = await run(["tenants", "create", "--name", "Acme", "--plan", "pro"]);
    expect(table.code).toBe(0);
    expect(seen[0]).toEqual({ method: "POST", url: "/admin/tenants", authorization: "Bearer tok-env", body: { name: "Acme", plan: "pro" } });
    const [header, line] = table.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^ID\s+NAME\s+PLAN\s+WEIGHT\s+RPM/);
    expect(line).toMatch(/^ten_1\s+Acme\s+pro\s+1\s+60\s+60000\s+4\s+10\s+none\s+2031-01-02T03:04:05Z$/);

    const json = await run(["tenants", "create", "--name", "Acme", "--json", "--weight", "2.5"]);
    expect(json.code).toBe(0);
    expect(seen[1]?.body).toEqual({ name: "Acme", weight: 2.5 });
    expect(JSON.parse(json.stdout)).toEqual(tenant({ plan: "pro" }));
  });

  it("lists tenants and sets a plan", async () => {
    reply = (req) =>
      req.method === "GET"
        ? { status: 200, body: { object: "list", data: [tenant(), tenant({ id: "ten_2", name: "Globex" })] } }
        : { status: 200, body: tenant({ plan: "pro" }) };
    const list = await run(["tenants", "list"]);
    expect(list.code).toBe(0);
    expect(list.stdout.trimEnd().split("\n")).toHaveLength(3);
    expect(list.stdout).toContain("Globex");

    const moved = await run(["tenants", "set-plan", "ten_1", "pro"]);
    expect(moved.code).toBe(0);
    expect(seen.at(-1)).toMatchObject({ method: "PATCH", url: "/admin/tenants/ten_1", body: { plan: "pro" } });

    expect((await run(["tenants", "set-inference", "ten_1", "off"])).code).toBe(0);
    expect(seen.at(-1)).toMatchObject({ method: "PATCH", url: "/admin/tenants/ten_1", body: { program_inference: false } });
    const sent = seen.length;
    const bad = await run(["tenants", "set-inference", "ten_1", "maybe"]);
    expect(bad.code).toBe(2);
    expect(seen).toHaveLength(sent);
  });

  it("sends overrides with inherit as null", async () => {
    reply = () => ({ status: 200, body: tenant() });
    const res = await run(["tenants", "override", "ten_1", "--rpm", "100", "--monthly-token-budget", "inherit"]);
    expect(res.code).toBe(0);
    expect(seen[0]).toMatchObject({
      method: "PATCH",
      url: "/admin/tenants/ten_1/overrides",
      body: { rpm: 100, monthly_token_budget: null },
    });
    const none = await run(["tenants", "override", "ten_1"]);
    expect(none.code).toBe(2);
    expect(seen).toHaveLength(1);

    const extras = await run([
      "tenants", "override", "ten_1", "--max-output-tokens", "2048", "--tool-events-per-minute", "inherit", "--allowed-extensions", "min_tokens",
    ]);
    expect(extras.code).toBe(0);
    expect(seen[1]?.body).toEqual({ max_output_tokens: 2048, tool_events_per_minute: null, allowed_extensions: ["min_tokens"] });
    await run(["tenants", "override", "ten_1", "--allowed-extensions", "inherit"]);
    expect(seen[2]?.body).toEqual({ allowed_extensions: null });
    await run(["tenants", "override", "ten_1", "--allowed-extensions", "none"]);
    expect(seen[3]?.body).toEqual({ allowed_extensions: [] });
  });

  it("shows the edge's OpenAI error message and exits 1 on an HTTP error", async () => {
    reply = () => ({ status: 400, body: openAIError("Plan gold does not exist; list plans with GET /admin/plans.", "unknown_plan") });
    const res = await run(["tenants", "create", "--name", "X", "--plan", "gold"]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("HTTP 400 (unknown_plan): Plan gold does not exist");
    expect(res.stdout).toBe("");
  });
});

describe("agentix admin keys", () => {
  const key = { id: "key_1", object: "api_key", tenant_id: "ten_1", name: "ci", prefix: "agx_abcdefgh", created_at: 0, revoked_at: null, last_used_at: null };

  it("creates (showing the key once), lists prefixes with last use, revokes", async () => {
    reply = (req) => {
      if (req.method === "POST") return { status: 201, body: { ...key, key: `agx_${"k".repeat(40)}` } };
      if (req.method === "DELETE") return { status: 200, body: { ...key, revoked_at: Date.UTC(2031, 0, 1) } };
      return { status: 200, body: { object: "list", data: [key, { ...key, id: "key_2", name: null, last_used_at: Date.UTC(2031, 0, 1) }] } };
    };
    const created = await run(["keys", "create", "ten_1", "--name", "ci"]);
    expect(created.code).toBe(0);
    expect(seen[0]).toMatchObject({ method: "POST", url: "/admin/tenants/ten_1/keys", body: { name: "ci" } });
    expect(created.stdout).toContain(`agx_${"k".repeat(40)}`);
    expect(created.stdout).toMatch(/only time/);

    const list = await run(["keys", "list", "ten_1"]);
    expect(list.stdout).toMatch(/^ID\s+NAME\s+PREFIX\s+CREATED\s+LAST USED\s+REVOKED/);
    expect(list.stdout).toContain("agx_abcdefgh…");
    expect(list.stdout).toContain("2031-01-01T00:00:00Z");

    const revoked = await run(["keys", "revoke", "key_1"]);
    expect(revoked.code).toBe(0);
    expect(seen.at(-1)).toMatchObject({ method: "DELETE", url: "/admin/keys/key_1" });
    expect(revoked.stdout).toContain("Revoked key key_1");
  });
});

describe("agentix admin plans", () => {
  const plan = { id: "team", name: "Team", rpm: 120, tpm: 1000, max_concurrent: 8, max_active_programs: 20, monthly_token_budget: null, default_max_tokens: 512, weight: 2 };
  /** `plans create` with every required flag for `plan`. */
  const CREATE_TEAM = [
    "plans", "create", "--id", "team", "--name", "Team", "--rpm", "120", "--tpm", "1000", "--max-concurrent", "8",
    "--max-active-programs", "20", "--monthly-token-budget", "none", "--default-max-tokens", "512",
  ];

  it("creates with numbers and 'none' for no budget; updates only what is given", async () => {
    reply = () => ({ status: 200, body: plan });
    const created = await run([...CREATE_TEAM, "--weight", "2"]);
    expect(created.code).toBe(0);
    expect(seen[0]?.body).toEqual({ id: "team", name: "Team", rpm: 120, tpm: 1000, max_concurrent: 8, max_active_programs: 20, monthly_token_budget: null, default_max_tokens: 512, weight: 2 });
    expect(created.stdout).toMatch(/team\s+Team\s+120\s+1000\s+8\s+20\s+none\s+512\s+-\s+2/);

    const updated = await run(["plans", "update", "team", "--rpm", "240"]);
    expect(updated.code).toBe(0);
    expect(seen[1]).toMatchObject({ method: "PATCH", url: "/admin/plans/team", body: { rpm: 240 } });
  });

  it("sets the output cap, allowed extensions and tool-event rate; shows them in the table", async () => {
    reply = () => ({ status: 200, body: { ...plan, max_output_tokens: 4096, allowed_extensions: ["ignore_eos", "min_tokens"], tool_events_per_minute: 600 } });
    const updated = await run([
      "plans", "update", "team", "--max-output-tokens", "4096", "--allowed-extensions", "min_tokens, ignore_eos", "--tool-events-per-minute", "600",
    ]);
    expect(updated.code).toBe(0);
    expect(seen[0]?.body).toEqual({ max_output_tokens: 4096, allowed_extensions: ["min_tokens", "ignore_eos"], tool_events_per_minute: 600 });
    expect(updated.stdout).toMatch(/^ID\s+NAME.*DEFAULT MAX TOKENS\s+MAX OUTPUT\s+WEIGHT\s+TOOL EVENTS\/MIN\s+EXTENSIONS\s+MODELS\s+REGIONS$/m);
    expect(updated.stdout).toMatch(/512\s+4096\s+2\s+600\s+ignore_eos,min_tokens\s+-\s+-$/m);

    reply = () => ({ status: 200, body: { ...plan, max_output_tokens: null, allowed_extensions: [], tool_events_per_minute: 6000 } });
    const cleared = await run(["plans", "update", "team", "--max-output-tokens", "none", "--allowed-extensions", "none"]);
    expect(cleared.code).toBe(0);
    expect(seen[1]?.body).toEqual({ max_output_tokens: null, allowed_extensions: [] });
    expect(cleared.stdout).toMatch(/512\s+none\s+2\s+6000\s+none\s+-\s+-$/m);

    // An edge from before these fields: its plans still print.
    reply = () => ({ status: 200, body: { object: "list", data: [plan] } });
    const old = await run(["plans", "list"]);
    expect(old.code).toBe(0);
    expect(old.stdout).toMatch(/512\s+-\s+2\s+-\s+-\s+-\s+-$/m);

    const badList = await run(["plans", "update", "team", "--allowed-extensions", "a,,b"]);
    expect(badList.code).toBe(2);
    expect(seen).toHaveLength(3);
  });

  it("restricts models and regions ('any' lifts a restriction) and shows them", async () => {
    reply = () => ({ status: 200, body: { ...plan, allowed_models: ["a-model", "org/b-model"], allowed_regions: null } });
    const restricted = await run(["plans", "update", "team", "--allowed-models", "org/b-model,a-model", "--allowed-regions", "any"]);
    expect(restricted.code).toBe(0);
    expect(seen[0]?.body).toEqual({ allowed_models: ["org/b-model", "a-model"], allowed_regions: null });
    expect(restricted.stdout).toMatch(/^ID\s+NAME.*\s+MODELS\s+REGIONS$/m);
    expect(restricted.stdout).toMatch(/\s+a-model,org\/b-model\s+any$/m);

    reply = () => ({ status: 201, body: { ...plan, allowed_models: null, allowed_regions: ["eu-west"] } });
    const created = await run([...CREATE_TEAM, "--allowed-regions", "eu-west"]);
    expect(created.code).toBe(0);
    expect(seen[1]?.body).toMatchObject({ id: "team", allowed_regions: ["eu-west"] });
    expect(seen[1]?.body).not.toHaveProperty("allowed_models");
    expect(created.stdout).toMatch(/\s+any\s+eu-west$/m);
  });

  it("refuses bad numbers and missing fields before sending anything", async () => {
    const missing = await run(["plans", "create", "--id", "x", "--name", "X"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--rpm");
    const notNumber = await run(["plans", "update", "team", "--rpm", "lots"]);
    expect(notNumber.code).toBe(2);
    expect(notNumber.stderr).toContain('--rpm must be a whole number');
    expect(seen).toHaveLength(0);
  });
});

describe("agentix admin pools", () => {
  const pool = (over: Record<string, unknown> = {}) => ({
    id: "euw-1",
    object: "pool",
    region: "eu-west",
    url: "https://eu.pool.example",
    models: ["a-model", "org/b-model"],
    weight: 2,
    status: "active",
    signing_key_id: "eu-2031",
    created_at: Date.UTC(2031, 0, 1),
    updated_at: Date.UTC(2031, 0, 2, 3, 4, 5),
    ...over,
  });

  it("adds a pool: POST with the fields, a table by default, the edge's JSON with --json", async () => {
    reply = () => ({ status: 201, body: pool() });
    const added = await run([
      "pools", "add", "euw-1", "--region", "eu-west", "--pool-url", "https://eu.pool.example", "--models", "a-model, org/b-model",
      "--weight", "2", "--key-id", "eu-2031",
    ]);
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(seen[0]).toEqual({
      method: "POST",
      url: "/admin/pools",
      authorization: "Bearer tok-env",
      body: { id: "euw-1", region: "eu-west", url: "https://eu.pool.example", models: ["a-model", "org/b-model"], weight: 2, signing_key_id: "eu-2031" },
    });
    const [header, line] = added.stdout.trimEnd().split("\n");
    expect(header).toMatch(/^ID\s+REGION\s+STATUS\s+HEALTH\s+LOAD\s+WEIGHT\s+KEY ID\s+MODELS\s+UPDATED\s+URL$/);
    expect(line).toMatch(/^euw-1\s+eu-west\s+active\s+-\s+-\s+2\s+eu-2031\s+a-model,org\/b-model\s+2031-01-02T03:04:05Z\s+https:\/\/eu\.pool\.example$/);

    const json = await run(["pools", "add", "euw-1", "--region", "eu-west", "--pool-url", "http://x", "--models", "m", "--key-id", "k", "--status", "disabled", "--json"]);
    expect(json.stderr).toBe("");
    expect(json.code).toBe(0);
    expect(seen[1]?.body).toEqual({ id: "euw-1", region: "eu-west", url: "http://x", models: ["m"], signing_key_id: "k", status: "disabled" });
    expect(JSON.parse(json.stdout)).toEqual(pool());
  });

  it("lists, shows, and updates only what is given", async () => {
    reply = (req) =>
      req.url === "/admin/pools"
        ? {
            status: 200,
            body: {
              object: "list",
              data: [
                pool({ health: { healthy: true, load: 3.5, read_at: 1 } }),
                pool({ id: "use1-a", region: "us-east", status: "draining", health: { healthy: false, load: 0, read_at: 1, error: "refused" } }),
                pool({ id: "aps1-a", region: "ap-southeast", health: null }),
              ],
            },
          }
        : { status: 200, body: pool({ weight: 0.5 }) };
    const list = await run(["pools", "list"]);
    expect(list.code).toBe(0);
    expect(seen[0]).toMatchObject({ method: "GET", url: "/admin/pools" });
    expect(list.stdout.trimEnd().split("\n")).toHaveLength(4);
    expect(list.stdout).toMatch(/^euw-1\s+eu-west\s+active\s+ok\s+3\.5\s/m);
    expect(list.stdout).toMatch(/^use1-a\s+us-east\s+draining\s+down\s+0\s/m);
    expect(list.stdout).toMatch(/^aps1-a\s+ap-southeast\s+active\s+unread\s+-\s/m);

    const shown = await run(["pools", "show", "euw-1"]);
    expect(shown.code).toBe(0);
    expect(seen[1]).toMatchObject({ method: "GET", url: "/admin/pools/euw-1" });
    expect(shown.stdout).toMatch(/^euw-1\s+eu-west\s+active\s+-\s+-\s+0\.5\s/m);

    const updated = await run(["pools", "update", "euw-1", "--weight", "0.5", "--models", "c-model", "--key-id", "eu-2032"]);
    expect(updated.code).toBe(0);
    expect(seen[2]).toMatchObject({ method: "PATCH", url: "/admin/pools/euw-1", body: { weight: 0.5, models: ["c-model"], signing_key_id: "eu-2032" } });
    expect(Object.keys(seen[2]?.body as object)).toEqual(["models", "weight", "signing_key_id"]);

    // --url stays the edge's, as in every command; the pool's is --pool-url.
    const moved = await run(["pools", "update", "euw-1", "--pool-url", "http://10.0.0.7:8080", "--url", baseUrl], { AGENTIX_URL: "http://127.0.0.1:1" });
    expect(moved.code).toBe(0);
    expect(seen[3]).toMatchObject({ method: "PATCH", url: "/admin/pools/euw-1", body: { url: "http://10.0.0.7:8080" } });
  });

  it("drains, disables and activates with POST /admin/pools/{id}/{action}", async () => {
    const statuses = { drain: "draining", disable: "disabled", activate: "active" } as const;
    reply = (req) => ({ status: 200, body: pool({ status: statuses[req.url.split("/").at(-1) as keyof typeof statuses] }) });
    for (const [action, status] of Object.entries(statuses)) {
      const res = await run(["pools", action, "euw-1"]);
      expect(res.code).toBe(0);
      expect(seen.at(-1)).toMatchObject({ method: "POST", url: `/admin/pools/euw-1/${action}` });
      expect(res.stdout).toMatch(new RegExp(`^euw-1\\s+eu-west\\s+${status}\\s`, "m"));
    }
  });

  it("refuses a missing field or an empty update before sending anything; shows the edge's refusal", async () => {
    const missing = await run(["pools", "add", "euw-1", "--region", "eu-west", "--pool-url", "https://eu.pool.example", "--models", "m"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("Missing --key-id.");
    const noModels = await run(["pools", "add", "euw-1", "--region", "r", "--pool-url", "http://x", "--models", "none", "--key-id", "k"]);
    expect(noModels.code).toBe(2);
    expect((await run(["pools", "update", "euw-1"])).code).toBe(2);
    expect((await run(["pools", "update", "euw-1", "--weight", "0"])).code).toBe(2);
    expect((await run(["pools", "drain"])).code).toBe(2);
    expect(seen).toHaveLength(0);

    reply = () => ({ status: 404, body: openAIError("Pool nope not found.", "pool_not_found") });
    const unknown = await run(["pools", "drain", "nope"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("HTTP 404 (pool_not_found): Pool nope not found.");
  });
});

describe("agentix admin usage export", () => {
  const csv = "period,tenant_id\r\n2031-05,ten_1\r\n2031-05,TOTAL\r\n";

  it("writes CSV to --out and JSON to stdout", async () => {
    reply = (req) =>
      req.url.includes("format=csv")
        ? { status: 200, body: csv, contentType: "text/csv" }
        : {
            status: 200,
            body: {
              object: "usage_export",
              period: "2031-05",
              data: [{ tenant_id: "ten_1", tenant_name: "A", plan: "free", calls: 1, prompt_tokens: 2, cached_tokens: 0, completion_tokens: 3, total_tokens: 5, service_ms: 4 }],
              totals: { calls: 1, prompt_tokens: 2, cached_tokens: 0, completion_tokens: 3, total_tokens: 5, service_ms: 4 },
            },
          };
    const toFile = await run(["usage", "export", "--period", "2031-05", "--out", "may.csv"]);
    expect(toFile.code).toBe(0);
    expect(seen[0]).toMatchObject({ method: "GET", url: "/admin/usage/export?period=2031-05&format=csv" });
    expect(await readFile(path.join(cwd, "may.csv"), "utf8")).toBe(csv);
    expect(toFile.stdout).toContain("may.csv");

    const json = await run(["usage", "export", "--period", "2031-05", "--format", "json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ period: "2031-05", totals: { total_tokens: 5 } });
  });

  it("checks the period before asking the edge", async () => {
    const res = await run(["usage", "export", "--period", "May"]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("YYYY-MM");
    expect(seen).toHaveLength(0);
  });
});

describe("connection and command line", () => {
  it("reads .agentix/credentials.json when flags and env are absent; env and flags win over it", async () => {
    reply = () => ({ status: 200, body: { object: "list", data: [] } });
    await mkdir(path.join(cwd, ".agentix"));
    await writeFile(path.join(cwd, ".agentix", "credentials.json"), JSON.stringify({ adminToken: "tok-file", edgeUrl: baseUrl, devKey: "x" }));
    expect((await run(["plans", "list"], { AGENTIX_URL: "", AGENTIX_ADMIN_TOKEN: "" })).code).toBe(0);
    expect(seen[0]?.authorization).toBe("Bearer tok-file");
    await run(["plans", "list"], { AGENTIX_URL: "" });
    expect(seen[1]?.authorization).toBe("Bearer tok-env");
    await run(["plans", "list", "--admin-token", "tok-flag"]);
    expect(seen[2]?.authorization).toBe("Bearer tok-flag");
  });

  it("says how to connect when nothing says where the edge is", async () => {
    const res = await run(["plans", "list"], { AGENTIX_URL: "", AGENTIX_ADMIN_TOKEN: "" });
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("AGENTIX_URL");
  });

  it("exits 1 with a clear message when the edge cannot be reached", async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const res = await run(["plans", "list", "--url", `http://127.0.0.1:${port}`]);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain("Cannot reach the edge");
  });

  it("rejects unknown commands, unknown flags, and wrong arguments with exit 2", async () => {
    expect((await run(["bogus"])).code).toBe(2);
    expect((await run(["tenants", "explode"])).code).toBe(2);
    expect((await run(["tenants", "list", "--frobnicate"])).code).toBe(2);
    expect((await run(["keys", "list"])).code).toBe(2);
    expect((await run(["tenants", "create"])).stderr).toContain("--name is required");
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("agentix admin usage export --period YYYY-MM");
    expect(seen).toHaveLength(0);
  });
});
