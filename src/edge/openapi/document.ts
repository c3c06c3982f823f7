import { z } from "zod";
import { OpenAIErrorBody } from "../../protocol/errors.js";
import { AnthropicHeader, RateLimitHeader } from "../../protocol/headers.js";
import { PATH_PARAMETERS } from "./schemas.js";

/*
 * Builds the OpenAPI 3.1 document from a list of operations (operations.ts) and the
 * zod schemas the edge validates with. zod 4's own `z.toJSONSchema` converts them
 * (target draft-2020-12, the dialect of OpenAPI 3.1): request bodies, parameters and
 * headers with `io: "input"` (what a client may send: defaults optional, transforms'
 * input side), answers with `io: "output"`. Every named schema becomes
 * `#/components/schemas/<name>`, and a named schema nested in another is a `$ref`.
 */

export type HttpMethod = "get" | "post" | "put" | "patch" | "delete";
/** Who may call an operation: a tenant's API key, the admin token, or anyone. */
export type Auth = "tenant" | "admin" | "public";
export type JsonSchema = Record<string, unknown>;

/** A schema the document shows once, as `#/components/schemas/<name>`. */
export interface Named {
  readonly name: string;
  readonly schema: z.ZodType;
  readonly description?: string;
}

export const named = (name: string, schema: z.ZodType, description?: string): Named =>
  description === undefined ? { name, schema } : { name, schema, description };

/** A body that is not a named JSON schema (text, an event stream). */
export interface MediaSpec {
  schema: JsonSchema;
  /** The schema of each item of a stream (OpenAPI 3.2's `itemSchema`, here as `x-itemSchema`). */
  item?: Named;
}

export interface ResponseSpec {
  description: string;
  /** The application/json body. */
  json?: Named;
  /** Other media types (or a JSON body with no schema of its own). */
  media?: Record<string, MediaSpec>;
  /** Headers of this answer (names from RESPONSE_HEADERS). */
  headers?: readonly string[];
}

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 429 | 500 | 502 | 503 | 504;

export interface OperationSpec {
  method: HttpMethod;
  /** OpenAPI's form: `/v1/programs/{programId}`; each `{name}` must be in PATH_PARAMETERS. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: readonly string[];
  auth: Auth;
  query?: z.ZodObject;
  /** Request headers (their zod object's keys are the header names). */
  headers?: z.ZodObject;
  body?: { schema: Named; required?: boolean; description?: string };
  /** The successful answers, by status. */
  responses: Partial<Record<number, ResponseSpec>>;
  /** The error answers this operation may give, by status: what each means here (the codes). */
  errors?: Partial<Record<ErrorStatus, string>>;
  /** Headers on every answer of the operation, errors included. */
  headersOnEvery?: readonly string[];
  /** The shape of its error bodies: OpenAI's (ERROR_SCHEMA) unless the API has its own (Anthropic's for /v1/messages). */
  errorSchema?: Named;
}

export interface HeaderSpec {
  description: string;
  schema: z.ZodType;
}

export interface DocumentSpec {
  info: { title: string; version: string; description: string };
  tags: readonly { name: string; description: string }[];
  operations: readonly OperationSpec[];
  /** Response headers, by name; operations refer to them by name. */
  responseHeaders: Record<string, HeaderSpec>;
  /** Named schemas shown although no operation names them directly (those nested in others, stream items). */
  components?: { input?: readonly Named[]; output?: readonly Named[] };
}

export interface OpenApiDocument {
  openapi: string;
  jsonSchemaDialect: string;
  info: DocumentSpec["info"];
  servers?: { url: string; description?: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Record<string, Record<string, unknown>>>;
  components: {
    schemas: Record<string, JsonSchema>;
    headers: Record<string, Record<string, unknown>>;
    securitySchemes: Record<string, Record<string, unknown>>;
  };
}

export const OPENAPI_VERSION = "3.1.1";
const SCHEMA_REF = "#/components/schemas/";
export const ERROR_SCHEMA: Named = named(
  "OpenAIError",
  OpenAIErrorBody,
  "OpenAI's error shape, which every error of the edge has. `code` says what went wrong; `param` names the offending field, parameter or header.",
);

export const SECURITY_SCHEMES = {
  tenantApiKey: {
    type: "http",
    scheme: "bearer",
    bearerFormat: "agx_, 40 letters or digits, then _ and the tenant ID (keys issued before: agx_ and 40 letters or digits)",
    description:
      "A tenant's API key (`Authorization: Bearer agx_…`), created by the admin API. Checked on every request: a revoked key is refused from the next one.",
  },
  tenantApiKeyHeader: {
    type: "apiKey",
    in: "header",
    name: AnthropicHeader.apiKey,
    description: "The same tenant API key in `x-api-key`, as Anthropic's clients send it (when there is no bearer token).",
  },
  adminToken: {
    type: "http",
    scheme: "bearer",
    description:
      "The deployment's ADMIN_TOKEN (`Authorization: Bearer …`). Without one, or with one under 32 characters, the admin API is disabled (403).",
  },
} as const;

const SECURITY: Record<Auth, Record<string, string[]>[]> = {
  // Either: a bearer token, or x-api-key.
  tenant: [{ tenantApiKey: [] }, { tenantApiKeyHeader: [] }],
  admin: [{ adminToken: [] }],
  // Explicitly public: overrides any top-level requirement.
  public: [],
};

const ERROR_TITLES: Record<ErrorStatus, string> = {
  400: "Invalid request",
  401: "Not authenticated",
  403: "Forbidden",
  404: "Not found",
  409: "Conflict",
  413: "Request body too large",
  429: "Limit exceeded",
  500: "Internal error",
  502: "Bad gateway",
  503: "Unavailable",
  504: "Timed out",
};

/** What every operation of a kind may answer, unless it says more. */
const AUTH_ERRORS: Record<Auth, Partial<Record<ErrorStatus, string>>> = {
  tenant: {
    401: "no key, a malformed one, or a wrong or revoked one (`invalid_api_key`).",
    500: "`internal_error`, `plan_missing`, `edge_misconfigured`.",
  },
  admin: {
    401: "`invalid_admin_token`: no admin token or a wrong one.",
    403: "`admin_disabled` (no ADMIN_TOKEN), `admin_token_too_weak` (said to the caller presenting it).",
    500: "`internal_error`, `edge_misconfigured`.",
  },
  public: { 500: "`internal_error`." },
};

/** Statuses whose answers carry Retry-After (limits, and the pool's passing trouble). */
const RETRY_AFTER_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

const ref = (name: string) => ({ $ref: `${SCHEMA_REF}${name}` });

type OverrideContext = { zodSchema: unknown; jsonSchema: JsonSchema };

/** z.int()'s safe-integer bounds say nothing a reader needs: dropped. */
function plainIntegers({ jsonSchema }: OverrideContext) {
  if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
  if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
}

/** Answers are open (a field may be added); only strict objects say `additionalProperties: false`. */
function openObjects(ctx: OverrideContext) {
  const def = (ctx.zodSchema as { _zod?: { def?: { type?: string; catchall?: unknown } } })._zod?.def;
  if (def?.type === "object" && def.catchall === undefined) delete ctx.jsonSchema.additionalProperties;
}

const overrideFor = (io: "input" | "output") =>
  io === "input"
    ? plainIntegers
    : (ctx: OverrideContext) => {
        plainIntegers(ctx);
        openObjects(ctx);
      };

function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): JsonSchema {
  const json = z.toJSONSchema(schema, {
    target: "draft-2020-12",
    io,
    unrepresentable: "throw",
    override: overrideFor(io),
  }) as JsonSchema;
  delete json.$schema;
  return json;
}

/** Converts named schemas as one registry, so one nested in another is a $ref to it. */
function componentSchemas(entries: readonly Named[], io: "input" | "output"): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const entry of entries) registry.add(entry.schema, { id: entry.name });
  const { schemas } = z.toJSONSchema(registry, {
    target: "draft-2020-12",
    io,
    unrepresentable: "throw",
    uri: (id) => `${SCHEMA_REF}${id}`,
    override: overrideFor(io),
  }) as { schemas: Record<string, JsonSchema> };
  const out: Record<string, JsonSchema> = {};
  for (const entry of entries) {
    const { $schema: _dialect, $id: _id, ...schema } = schemas[entry.name] ?? {};
    out[entry.name] = entry.description === undefined || "description" in schema ? schema : { ...schema, description: entry.description };
  }
  return out;
}

/** One parameter per property of a zod object, described by its input JSON Schema. */
function parametersOf(object: z.ZodObject, where: "path" | "query" | "header") {
  const json = jsonSchemaOf(object, "input") as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...schema } = property;
    return {
      name,
      in: where,
      required: where === "path" || (json.required ?? []).includes(name),
      ...(typeof description === "string" ? { description } : {}),
      schema,
    };
  });
}

/** The `{name}`s of an OpenAPI path template. */
export const pathParameterNames = (path: string): string[] => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? "");

function pathParameters(op: OperationSpec) {
  const shape: Record<string, z.ZodType> = {};
  for (const name of pathParameterNames(op.path)) {
    const schema = PATH_PARAMETERS[name];
    if (!schema) throw new Error(`OpenAPI: ${op.operationId} has path parameter {${name}}, which PATH_PARAMETERS does not describe`);
    shape[name] = schema;
  }
  return Object.keys(shape).length === 0 ? [] : parametersOf(z.object(shape), "path");
}

/** Collects every named schema, refusing one name for two schemas or two names for one. */
class Components {
  readonly input: Named[] = [];
  readonly output: Named[] = [];
  private readonly byName = new Map<string, { named: Named; io: "input" | "output" }>();
  private readonly bySchema = new Map<z.ZodType, string>();

  add(entry: Named, io: "input" | "output"): string {
    const known = this.byName.get(entry.name);
    if (known) {
      if (known.named.schema !== entry.schema) throw new Error(`OpenAPI: two schemas are named ${entry.name}`);
      if (known.io !== io) throw new Error(`OpenAPI: ${entry.name} is both a request and an answer schema; name each side`);
      return entry.name;
    }
    const otherName = this.bySchema.get(entry.schema);
    if (otherName !== undefined) throw new Error(`OpenAPI: one schema is named both ${otherName} and ${entry.name}`);
    this.byName.set(entry.name, { named: entry, io });
    this.bySchema.set(entry.schema, entry.name);
    (io === "input" ? this.input : this.output).push(entry);
    return entry.name;
  }
}

function mediaObject(media: MediaSpec, components: Components) {
  return {
    schema: media.schema,
    ...(media.item ? { "x-itemSchema": ref(components.add(media.item, "output")) } : {}),
  };
}

function headersObject(names: readonly string[], known: Record<string, HeaderSpec>, where: string) {
  const out: Record<string, { $ref: string }> = {};
  for (const name of names) {
    if (!known[name]) throw new Error(`OpenAPI: ${where} names header ${name}, which responseHeaders does not describe`);
    out[name] = { $ref: `#/components/headers/${name}` };
  }
  return out;
}

function operationObject(op: OperationSpec, spec: DocumentSpec, components: Components) {
  const every = op.headersOnEvery ?? [];
  const responses: [number, Record<string, unknown>][] = [];
  for (const [status, response] of Object.entries(op.responses)) {
    if (!response) continue;
    const content: Record<string, unknown> = {};
    if (response.json) content["application/json"] = { schema: ref(components.add(response.json, "output")) };
    for (const [type, media] of Object.entries(response.media ?? {})) content[type] = mediaObject(media, components);
    const headers = headersObject([...every, ...(response.headers ?? [])], spec.responseHeaders, op.operationId);
    responses.push([
      Number(status),
      {
        description: response.description,
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        ...(Object.keys(content).length > 0 ? { content } : {}),
      },
    ]);
  }
  const errors = { ...AUTH_ERRORS[op.auth], ...op.errors };
  const errorSchema = ref(components.add(op.errorSchema ?? ERROR_SCHEMA, "output"));
  for (const [key, meaning] of Object.entries(errors)) {
    const status = Number(key) as ErrorStatus;
    const names = [...every, ...(RETRY_AFTER_STATUSES.has(status) ? [RateLimitHeader.retryAfter] : [])];
    const headers = headersObject([...new Set(names)], spec.responseHeaders, op.operationId);
    responses.push([
      status,
      {
        description: `${ERROR_TITLES[status]}: ${meaning}`,
        ...(Object.keys(headers).length > 0 ? { headers } : {}),
        content: { "application/json": { schema: errorSchema } },
      },
    ]);
  }
  responses.sort(([a], [b]) => a - b);

  const parameters = [
    ...pathParameters(op),
    ...(op.query ? parametersOf(op.query, "query") : []),
    ...(op.headers ? parametersOf(op.headers, "header") : []),
  ];
  return {
    operationId: op.operationId,
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    tags: [...op.tags],
    security: SECURITY[op.auth],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(op.body
      ? {
          requestBody: {
            required: op.body.required ?? true,
            ...(op.body.description ? { description: op.body.description } : {}),
            content: { "application/json": { schema: ref(components.add(op.body.schema, "input")) } },
          },
        }
      : {}),
    responses: Object.fromEntries(responses.map(([status, response]) => [String(status), response])),
  };
}

/** The document. Throws on an inconsistent spec (a duplicate operation, an undescribed parameter or header). */
export function buildDocument(spec: DocumentSpec): OpenApiDocument {
  const components = new Components();
  for (const entry of spec.components?.input ?? []) components.add(entry, "input");
  for (const entry of spec.components?.output ?? []) components.add(entry, "output");

  const paths: OpenApiDocument["paths"] = {};
  const operationIds = new Set<string>();
  for (const op of spec.operations) {
    if (operationIds.has(op.operationId)) throw new Error(`OpenAPI: operationId ${op.operationId} is used twice`);
    operationIds.add(op.operationId);
    const item = (paths[op.path] ??= {});
    if (item[op.method]) throw new Error(`OpenAPI: ${op.method.toUpperCase()} ${op.path} is listed twice`);
    item[op.method] = operationObject(op, spec, components);
  }

  const headers: OpenApiDocument["components"]["headers"] = {};
  for (const [name, header] of Object.entries(spec.responseHeaders)) {
    headers[name] = { description: header.description, schema: jsonSchemaOf(header.schema, "output") };
  }

  return {
    openapi: OPENAPI_VERSION,
    jsonSchemaDialect: "https://spec.openapis.org/oas/3.1/dialect/base",
    info: spec.info,
    tags: spec.tags.map((tag) => ({ ...tag })),
    paths,
    components: {
      schemas: { ...componentSchemas(components.input, "input"), ...componentSchemas(components.output, "output") },
      headers,
      securitySchemes: structuredClone(SECURITY_SCHEMES) as unknown as OpenApiDocument["components"]["securitySchemes"],
    },
  };
}
