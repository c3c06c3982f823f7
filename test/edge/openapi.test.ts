import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { z } from "zod";
import { createApp } from "../../src/edge/app";
import { buildDocument, type OpenApiDocument, pathParameterNames } from "../../src/edge/openapi/document";
import { DOCUMENT_SPEC, OPERATIONS } from "../../src/edge/openapi/operations";
import {
  ApiKeyList,
  ModelList,
  ModelObject,
  PlanList,
  PoolList,
  ProgramObject,
  TenantList,
  ToolEventsAnswer,
  UsageExport,
  UsageReport,
} from "../../src/edge/openapi/schemas";
import { poolMonitor } from "../../src/edge/pools/directory-cache";
import type { PoolMonitor } from "../../src/edge/pools/monitor";
import { ApiKeyObject, CreatedApiKeyObject, PlanObject, PoolObject, TenantObject } from "../../src/edge/routes/admin/views";
import { MESSAGE_FIELDS, REQUEST_FIELDS } from "../../src/protocol/chat";
import { OpenAIErrorBody } from "../../src/protocol/errors";
import { AnthropicHeader, Header, RateLimitHeader } from "../../src/protocol/headers";
import { CountTokensResponse, MessagesErrorBody } from "../../src/protocol/messages";
import { addPools, adminFetch, chat, drain, edge, mockPool, newTenant, poolJson, tenantFetch, testPool } from "./support";

/*
 * Issue 12 (OpenAPI): GET /openapi.json is a valid OpenAPI 3.1 document generated from
 * the zod schemas, covering every route the app serves, and GET /docs renders it.
 * The last part checks real answers against the schemas the document shows, so a
 * view, a route's inline answer or a header that drifts from the document fails here.
 */

type Json = Record<string, unknown>;
type Operation = { operationId: string; security?: Json[]; responses?: Record<string, Json>; parameters?: Json[]; requestBody?: Json };

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;

async function fetchDocument(): Promise<OpenApiDocument> {
  const res = await edge("/openapi.json");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  return (await res.json()) as OpenApiDocument;
}

/** Resolves a local JSON pointer ("#/components/schemas/X") in the document. */
function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith("#/")) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split("/")) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~");
    if (typeof node !== "object" || node === null || !Object.hasOwn(node, key)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

/** Every `$ref` in the document, with where it sits. */
function refsIn(node: unknown, at = "#"): { at: string; ref: string }[] {
  if (Array.isArray(node)) return node.flatMap((item, i) => refsIn(item, `${at}/${i}`));
  if (typeof node !== "object" || node === null) return [];
  return Object.entries(node).flatMap(([key, value]) =>
    key === "$ref" && typeof value === "string" ? [{ at, ref: value }] : refsIn(value, `${at}/${key}`),
  );
}

function operationsOf(doc: OpenApiDocument): { method: string; path: string; op: Operation }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => m in item).map((method) => ({ method, path, op: item[method] as unknown as Operation })),
  );
}

const deref = (doc: OpenApiDocument, schema: Json): Json =>
  typeof schema.$ref === "string" ? (resolvePointer(doc, schema.$ref) as Json) : schema;

/** A hono route path in OpenAPI's form: `:name` and `:name{regex}` become `{name}`. */
const openApiPath = (honoPath: string) => honoPath.replace(/:(\w+)(\{[^}]*\})?/g, "{$1}");

/** The app's routes, without the middleware (`use` registers method ALL on a path its handlers also serve, or on a wildcard). */
function servedRoutes() {
  const routes = createApp().routes;
  const handled = new Set(routes.filter((r) => r.method !== "ALL").map((r) => r.path));
  return routes.filter((r) => r.method !== "ALL" || (!r.path.includes("*") && !handled.has(r.path)));
}

/** The app's routes the document does not list, as "METHOD /path". */
function missingFromDocument(doc: Pick<OpenApiDocument, "paths">): string[] {
  return servedRoutes()
    .map((r) => ({ method: r.method.toLowerCase(), path: openApiPath(r.path) }))
    .filter(({ method, path }) => {
      const item = doc.paths[path];
      return !item || (method === "all" ? Object.keys(item).length === 0 : !(method in item));
    })
    .map(({ method, path }) => `${method.toUpperCase()} ${path}`);
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("GET /openapi.json: an OpenAPI 3.1 document", () => {
  it("is public and has OpenAPI 3.1's structure", async () => {
    const doc = await fetchDocument();
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    expect(Object.keys(doc.paths).length).toBeGreaterThan(0);
    for (const path of Object.keys(doc.paths)) expect(path).toMatch(/^\//);
    expect(Object.keys(doc.components.schemas).length).toBeGreaterThan(0);
    // The server is the origin asked.
    expect(doc.servers).toEqual([{ url: "http://edge.test" }]);
    // Component names as OpenAPI allows them; no schema keeps zod's $schema / $id.
    for (const section of Object.values(doc.components)) {
      for (const name of Object.keys(section)) expect(name).toMatch(/^[a-zA-Z0-9._-]+$/);
    }
    for (const schema of Object.values(doc.components.schemas)) {
      expect(schema).not.toHaveProperty("$schema");
      expect(schema).not.toHaveProperty("$id");
    }
  });

  it("resolves every $ref inside the document", async () => {
    const doc = await fetchDocument();
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(20);
    const broken = refs.filter(({ ref }) => resolvePointer(doc, ref) === undefined);
    expect(broken).toEqual([]);
    // And the check itself catches a dangling one.
    expect(resolvePointer(doc, "#/components/schemas/NoSuchSchema")).toBeUndefined();
  });

  it("gives every operation responses, a unique operationId, its path parameters, and a security requirement or an explicit public one", async () => {
    const doc = await fetchDocument();
    const schemes = doc.components.securitySchemes;
    expect(schemes.tenantApiKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(schemes.adminToken).toMatchObject({ type: "http", scheme: "bearer" });
    expect(schemes.tenantApiKeyHeader).toEqual(expect.objectContaining({ type: "apiKey", in: "header", name: AnthropicHeader.apiKey }));
    const ids = new Set<string>();
    const publicOps: string[] = [];
    for (const { method, path, op } of operationsOf(doc)) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(op.operationId, where).toMatch(/^\w+$/);
      expect(ids.has(op.operationId), `${where}: operationId ${op.operationId} repeated`).toBe(false);
      ids.add(op.operationId);

      expect(Object.keys(op.responses ?? {}).length, `${where} has no responses`).toBeGreaterThan(0);
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        expect(status, where).toMatch(/^[1-5]\d\d$/);
        expect(typeof response.description, `${where} ${status}`).toBe("string");
        if (Number(status) >= 400) {
          // OpenAI's error shape, whatever went wrong; Anthropic's on the Messages API.
          const shape = path === "/v1/messages" || path.startsWith("/v1/messages/") ? "MessagesError" : "OpenAIError";
          expect(response.content, `${where} ${status}`).toEqual({
            "application/json": { schema: { $ref: `#/components/schemas/${shape}` } },
          });
        }
      }

      expect(Array.isArray(op.security), `${where} has no security requirement`).toBe(true);
      const security = op.security ?? [];
      if (security.length === 0) publicOps.push(where);
      for (const requirement of security) {
        for (const scheme of Object.keys(requirement)) expect(schemes, where).toHaveProperty(scheme);
      }
      // A tenant's key as a bearer token, or in x-api-key.
      if (path.startsWith("/v1/")) expect(security, where).toEqual([{ tenantApiKey: [] }, { tenantApiKeyHeader: [] }]);
      if (path.startsWith("/admin/")) expect(security, where).toEqual([{ adminToken: [] }]);

      // Path templating: each {name} has a required path parameter, and no other.
      const pathParams = (op.parameters ?? []).filter((p) => p.in === "path");
      expect(pathParams.map((p) => p.name).sort(), where).toEqual(pathParameterNames(path).sort());
      for (const p of pathParams) expect(p.required, where).toBe(true);
    }
    expect(publicOps.sort()).toEqual(["GET /docs", "GET /health", "GET /openapi.json"]);
  });

  it("has OpenAI's error shape as the OpenAIError schema", async () => {
    const doc = await fetchDocument();
    const error = doc.components.schemas.OpenAIError as { properties: { error: Json }; required: string[] };
    expect(error.required).toEqual(["error"]);
    const inner = deref(doc, error.properties.error) as { properties: Json; required: string[] };
    expect(Object.keys(inner.properties).sort()).toEqual(["code", "message", "param", "type"]);
    expect(inner.required.sort()).toEqual(["code", "message", "param", "type"]);
  });

  it("lists every route the app serves, and serves every route it lists", async () => {
    const doc = await fetchDocument();
    const served = servedRoutes();
    // Sanity: the walk sees the app's routes (chat, the admin API), not just a few.
    expect(served.length).toBeGreaterThanOrEqual(OPERATIONS.length);
    expect(missingFromDocument(doc)).toEqual([]);

    const servedKeys = new Set(served.map((r) => `${r.method.toLowerCase()} ${openApiPath(r.path)}`));
    const extra = operationsOf(doc)
      .map(({ method, path }) => `${method} ${path}`)
      .filter((key) => !servedKeys.has(key));
    expect(extra).toEqual([]);
  });

  it("would fail for a route the document leaves out", async () => {
    const doc = await fetchDocument();
    // Relative to the whole document (which another test requires to miss nothing).
    const already = new Set(missingFromDocument(doc));
    const newlyMissing = (paths: OpenApiDocument["paths"]) => missingFromDocument({ paths }).filter((r) => !already.has(r));
    const { "/v1/usage": _usage, ...paths } = doc.paths;
    expect(newlyMissing(paths)).toEqual(["GET /v1/usage"]);
    const { delete: _end, ...rest } = doc.paths["/v1/programs/{programId}"] ?? {};
    expect(newlyMissing({ ...doc.paths, "/v1/programs/{programId}": rest })).toEqual(["DELETE /v1/programs/{programId}"]);
  });

  it("names a route's path alternatives (`:action{a|b|c}`) as the parameter's enum", async () => {
    const doc = await fetchDocument();
    let seen = 0;
    for (const route of servedRoutes()) {
      for (const match of route.path.matchAll(/:(\w+)\{([\w|]+)\}/g)) {
        seen += 1;
        const op = doc.paths[openApiPath(route.path)]?.[route.method.toLowerCase()] as Operation;
        const param = op.parameters?.find((p) => p.in === "path" && p.name === match[1]);
        expect((param?.schema as { enum?: string[] }).enum?.sort(), route.path).toEqual(match[2]?.split("|").sort());
      }
    }
    expect(seen).toBeGreaterThan(0);
  });

  it("describes the chat request with every field src/protocol/chat.ts accepts, messages' fields included", async () => {
    const doc = await fetchDocument();
    const op = doc.paths["/v1/chat/completions"]?.post as Operation;
    const body = deref(doc, (op.requestBody as { content: { "application/json": { schema: Json } } }).content["application/json"].schema) as {
      properties: Record<string, Json>;
      required: string[];
    };
    expect(Object.keys(body.properties).sort()).toEqual([...REQUEST_FIELDS].sort());
    expect(body.required.sort()).toEqual(["messages", "model"]);
    const messages = body.properties.messages as { items: Json };
    const message = deref(doc, messages.items) as { properties: Json; required: string[] };
    expect(Object.keys(message.properties).sort()).toEqual([...MESSAGE_FIELDS].sort());
    expect(message.required).toEqual(["role"]);
    expect((message.properties.role as { enum: string[] }).enum).toContain("assistant");
    // Input side: optional fields with defaults are not required, and numbers keep their bounds.
    expect(body.properties.temperature).toEqual({ anyOf: [{ type: "number", minimum: 0, maximum: 2 }, { type: "null" }] });
  });

  it("documents the Agentix headers by their protocol/headers.ts names", async () => {
    const doc = await fetchDocument();
    const known = new Set<string>([...Object.values(Header), ...Object.values(RateLimitHeader), ...Object.values(AnthropicHeader)]);
    for (const name of Object.keys(doc.components.headers)) expect(known.has(name), name).toBe(true);

    const chatOp = doc.paths["/v1/chat/completions"]?.post as Operation;
    const requestHeaders = (chatOp.parameters ?? []).filter((p) => p.in === "header");
    expect(requestHeaders.map((p) => p.name)).toEqual([Header.program, Header.thread, Header.parentThread]);
    expect(requestHeaders.every((p) => p.required === false)).toBe(true);

    const ok = chatOp.responses?.["200"] as { headers: Json; content: Json };
    const rateLimit = Object.values(RateLimitHeader).filter((h) => h !== RateLimitHeader.retryAfter);
    expect(Object.keys(ok.headers).sort()).toEqual([...rateLimit, Header.program, Header.programSource, Header.pool, Header.requestId].sort());
    expect(Object.keys(ok.content).sort()).toEqual(["application/json", "text/event-stream"]);
    // Errors carry the rate-limit headers too, and a 429 says when to retry.
    const limited = chatOp.responses?.["429"] as { headers: Json };
    expect(Object.keys(limited.headers).sort()).toEqual([...rateLimit, RateLimitHeader.retryAfter].sort());
    for (const [path, method] of [
      ["/v1/programs", "post"],
      ["/v1/programs/{programId}", "get"],
      ["/v1/programs/{programId}/events", "post"],
    ] as const) {
      const op = doc.paths[path]?.[method] as Operation;
      const success = Object.entries(op.responses ?? {}).find(([s]) => s.startsWith("2"))?.[1] as { headers: Json };
      expect(Object.keys(success.headers), path).toEqual([Header.program]);
    }
  });

  it("refuses an inconsistent spec: an undescribed path parameter or header, a repeated operation", () => {
    const base = OPERATIONS.find((op) => op.operationId === "getProgram");
    expect(base).toBeDefined();
    if (!base) return;
    const spec = (op: typeof base) => ({ ...DOCUMENT_SPEC, operations: [op] });
    expect(() => buildDocument(spec({ ...base, path: "/v1/programs/{nope}" }))).toThrow(/nope/);
    expect(() => buildDocument(spec({ ...base, headersOnEvery: ["x-not-documented"] }))).toThrow(/x-not-documented/);
    expect(() => buildDocument({ ...DOCUMENT_SPEC, operations: [base, { ...base, operationId: "again" }] })).toThrow(/twice/);
    expect(buildDocument(spec(base)).paths["/v1/programs/{programId}"]).toHaveProperty("get");
  });
});

describe("GET /docs", () => {
  it("answers a public HTML page that loads /openapi.json, its script pinned by integrity", async () => {
    const res = await edge("/docs");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.headers.get("content-security-policy")).toContain("connect-src 'self'");
    const html = await res.text();
    expect(html).toMatch(/^<!doctype html>/i);
    expect(html).toContain('spec-url="/openapi.json"');
    expect(html).toMatch(/<script src="https:\/\/[^"]+" integrity="sha384-[A-Za-z0-9+/=]+" crossorigin="anonymous"><\/script>/);
  });
});

/** The body has the schema's shape exactly: an undocumented field fails (zod objects drop unknown keys). */
async function expectShape(res: Response, status: number, schema: z.ZodType): Promise<Json> {
  expect(res.status).toBe(status);
  const body = (await res.json()) as Json;
  const parsed = schema.safeParse(body);
  expect(parsed.error?.issues ?? []).toEqual([]);
  expect(parsed.data).toEqual(body);
  return body;
}

/** The Agentix and rate-limit headers on an answer are the ones the document lists for it. */
function expectDocumentedHeaders(doc: OpenApiDocument, res: Response, path: string, method: string) {
  const op = doc.paths[path]?.[method] as Operation;
  const documented = Object.keys((op.responses?.[String(res.status)]?.headers as Json | undefined) ?? {});
  const sent = [...res.headers.keys()].filter((h) => h.startsWith("x-agentix-") || h.startsWith("x-ratelimit-") || h === "x-request-id" || h === "retry-after");
  for (const header of sent) expect(documented, `${method.toUpperCase()} ${path} ${res.status} sends ${header}`).toContain(header);
}

describe("real answers have the shapes the document shows", () => {
  it("the tenant API: chat, programs, tool events, usage, models, errors", async () => {
    const doc = await fetchDocument();
    mockPool(() => poolJson());
    const tenant = await newTenant();

    const called = await chat(tenant);
    expect(called.status).toBe(200);
    expectDocumentedHeaders(doc, called, "/v1/chat/completions", "post");
    for (const header of [Header.program, Header.requestId, Header.pool, RateLimitHeader.remainingRequests]) {
      expect(called.headers.get(header), header).not.toBeNull();
    }
    await drain();

    const created = await tenantFetch(tenant, "/v1/programs", { method: "POST" });
    const program = await expectShape(created, 201, ProgramObject);
    expectDocumentedHeaders(doc, created, "/v1/programs", "post");
    const id = String(program.id);
    const events = await tenantFetch(tenant, `/v1/programs/${id}/events`, {
      method: "POST",
      body: JSON.stringify({
        events: [
          { type: "tool_started", tool: "bash", tool_call_id: "call_1", expected_duration_ms: 1500, deadline: "2030-01-01T00:00:10Z" },
          { type: "tool_started", tool: "grep", thread: "side" },
        ],
      }),
    });
    const answer = await expectShape(events, 202, ToolEventsAnswer);
    expect(answer.accepted).toBe(2);
    expectDocumentedHeaders(doc, events, "/v1/programs/{programId}/events", "post");
    const read = await tenantFetch(tenant, `/v1/programs/${id}`);
    expectDocumentedHeaders(doc, read, "/v1/programs/{programId}", "get");
    expect(((await expectShape(read, 200, ProgramObject)).tools as { in_flight: unknown[] }).in_flight).toHaveLength(2);
    await expectShape(await tenantFetch(tenant, `/v1/programs/${id}`, { method: "DELETE" }), 200, ProgramObject);
    await drain();

    // Each query parameter the document names is one the route takes; another is refused.
    const usageParams = ((doc.paths["/v1/usage"]?.get as Operation).parameters ?? []).map((p) => String(p.name));
    expect(usageParams.sort()).toEqual(["from", "group_by", "to"]);
    const today = new Date().toISOString().slice(0, 10);
    const byDay = await expectShape(await tenantFetch(tenant, `/v1/usage?group_by=day&from=${today}&to=${today}`), 200, UsageReport);
    expect((byDay.data as unknown[]).length).toBe(1);
    await expectShape(await tenantFetch(tenant, "/v1/usage?group_by=program"), 200, UsageReport);
    await expectShape(await tenantFetch(tenant, "/v1/usage?undocumented=1"), 400, OpenAIErrorBody);

    const models = await expectShape(await tenantFetch(tenant, "/v1/models"), 200, ModelList);
    expect((models.data as { id: string }[]).map((m) => m.id)).toContain("test-model");
    await expectShape(await tenantFetch(tenant, "/v1/models/test-model"), 200, ModelObject);
    await expectShape(await tenantFetch(tenant, "/v1/models/no-such"), 404, OpenAIErrorBody);
    await expectShape(await tenantFetch(tenant, "/v1/programs/prog_000000000000"), 404, OpenAIErrorBody);
    await expectShape(await edge("/v1/models"), 401, OpenAIErrorBody);

    // The Messages API answers Anthropic's error shape, as the document says.
    const messages = { model: "test-model", messages: [{ role: "user", content: "Hi." }] };
    const counted = await tenantFetch(tenant, "/v1/messages/count_tokens", { method: "POST", body: JSON.stringify(messages) });
    await expectShape(counted, 200, CountTokensResponse);
    const refused = await tenantFetch(tenant, "/v1/messages", { method: "POST", body: JSON.stringify({ ...messages, max_tokens: 0 }) });
    expect(refused.status).toBe(400);
    expect(MessagesErrorBody.safeParse(await refused.json()).success).toBe(true);
  });

  it("the admin API: plans, pools (with the monitor's reading), tenants, overrides, keys, usage export", async () => {
    const doc = await fetchDocument();
    const post = (path: string, body?: unknown) =>
      adminFetch(path, { method: "POST", ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const patch = (path: string, body: unknown) => adminFetch(path, { method: "PATCH", body: JSON.stringify(body) });

    const plan = { id: "oa-plan", name: "OA", rpm: 60, tpm: 60_000, max_concurrent: 4, max_active_programs: 10, monthly_token_budget: null, default_max_tokens: 256 };
    await expectShape(await post("/admin/plans", { ...plan, allowed_models: ["test-model"] }), 201, PlanObject);
    await expectShape(await adminFetch("/admin/plans/oa-plan"), 200, PlanObject);
    await expectShape(await patch("/admin/plans/oa-plan", { rpm: 61 }), 200, PlanObject);
    await expectShape(await adminFetch("/admin/plans"), 200, PlanList);
    await expectShape(await post("/admin/plans", plan), 409, OpenAIErrorBody);

    await addPools(testPool({ id: "oa-pool", url: "http://oa-pool.test" }));
    mockPool(() => poolJson());
    await runInDurableObject(poolMonitor(env), (instance) => (instance as PoolMonitor).alarm());
    const pool = await expectShape(await adminFetch("/admin/pools/oa-pool"), 200, PoolObject);
    // The reading with the pool's own figures: every optional field of PoolHealth but `error`.
    expect(Object.keys(pool.health as Json).sort()).toEqual(["engines", "healthy", "kv_free_tokens", "load", "queued", "read_at", "running"]);
    await expectShape(await adminFetch("/admin/pools"), 200, PoolList);
    await expectShape(await patch("/admin/pools/oa-pool", { weight: 2 }), 200, PoolObject);
    const action = (doc.paths["/admin/pools/{poolId}/{action}"]?.post as Operation).parameters?.find((p) => p.name === "action");
    for (const value of (action?.schema as { enum: string[] }).enum) {
      await expectShape(await post(`/admin/pools/oa-pool/${value}`), 200, PoolObject);
    }

    const tenant = await expectShape(await post("/admin/tenants", { name: "OA tenant", plan: "oa-plan" }), 201, TenantObject);
    const tenantId = String(tenant.id);
    await expectShape(await adminFetch(`/admin/tenants/${tenantId}`), 200, TenantObject);
    await expectShape(await patch(`/admin/tenants/${tenantId}`, { weight: 2 }), 200, TenantObject);
    await expectShape(await patch(`/admin/tenants/${tenantId}/overrides`, { rpm: 5, allowed_extensions: ["min_tokens"] }), 200, TenantObject);
    await expectShape(await adminFetch("/admin/tenants"), 200, TenantList);
    await expectShape(await post("/admin/tenants", { name: "x", plan: "no-such-plan" }), 400, OpenAIErrorBody);

    const key = await expectShape(await post(`/admin/tenants/${tenantId}/keys`, { name: "ci" }), 201, CreatedApiKeyObject);
    await expectShape(await adminFetch(`/admin/tenants/${tenantId}/keys`), 200, ApiKeyList);
    await expectShape(await adminFetch(`/admin/keys/${String(key.id)}`, { method: "DELETE" }), 200, ApiKeyObject);

    const exportParams = ((doc.paths["/admin/usage/export"]?.get as Operation).parameters ?? []).map((p) => String(p.name));
    expect(exportParams.sort()).toEqual(["format", "period"]);
    const period = new Date().toISOString().slice(0, 7);
    await expectShape(await adminFetch(`/admin/usage/export?period=${period}&format=json`), 200, UsageExport);
    const csv = await adminFetch(`/admin/usage/export?period=${period}&format=csv`);
    expect(csv.status).toBe(200);
    expect(csv.headers.get("content-type")).toMatch(/^text\/csv/);
    expect(Object.keys(((doc.paths["/admin/usage/export"]?.get as Operation).responses?.["200"] as { content: Json }).content).sort()).toEqual([
      "application/json",
      "text/csv",
    ]);
    await expectShape(await adminFetch(`/admin/usage/export?period=${period}&undocumented=1`), 400, OpenAIErrorBody);
    await expectShape(await edge("/admin/plans"), 401, OpenAIErrorBody);
  });
});
