import { z } from "zod";
import { version as packageVersion } from "../../../package.json";
import { ChatCompletion, ChatCompletionChunk, ChatCompletionRequest, ChatMessage, ToolCall, ToolDefinition, Usage } from "../../protocol/chat.js";
import { CompletionRequest, TextCompletion } from "../../protocol/completions.js";
import { AnthropicHeader, Header, PROGRAM_SOURCES, RateLimitHeader } from "../../protocol/headers.js";
import { PROGRAM_ID } from "../../protocol/ids.js";
import {
  CountTokensRequest,
  CountTokensResponse,
  MessageParam,
  MessagesErrorBody,
  MessagesRequest,
  MessagesResponse,
  MessagesStreamEvent,
  ToolParam,
} from "../../protocol/messages.js";
import { ResponseObject, ResponseStreamEvent, ResponsesRequest } from "../../protocol/responses.js";
import { MAX_TOOL_EVENTS_PER_BATCH, ToolEvent, ToolEventBatch, ToolFinishedEvent, ToolStartedEvent } from "../../protocol/tool-events.js";
import { EndThreadBody } from "../../protocol/threads.js";
import {
  CreateKeyBody,
  CreatePlanBody,
  CreatePoolBody,
  CreateTenantBody,
  TenantOverridesBody,
  UpdatePlanBody,
  UpdatePoolBody,
  UpdateTenantBody,
} from "../routes/admin/bodies.js";
import {
  ApiKeyObject,
  CreatedApiKeyObject,
  PlanObject,
  PoolHealth,
  PoolObject,
  TenantLedgerObject,
  TenantLimits,
  TenantObject,
} from "../routes/admin/views.js";
import { type DocumentSpec, type HeaderSpec, type Named, named, type OperationSpec } from "./document.js";
import {
  ApiKeyList,
  Health,
  ModelList,
  ModelObject,
  PlanList,
  PoolList,
  ProgramCallHeaders,
  ProgramObject,
  TenantList,
  ThreadEndAnswer,
  ThreadObject,
  ToolEventsAnswer,
  ToolEventsBody,
  ToolsObject,
  UsageExport,
  UsageExportQueryParams,
  UsageFigures,
  UsageQueryParams,
  UsageReport,
} from "./schemas.js";

/*
 * The edge's routes as the OpenAPI document shows them: ONE ENTRY PER ROUTE in
 * OPERATIONS. Adding a route to the app means adding its entry here (the test
 * test/edge/openapi.test.ts fails for a route the app serves that is not listed):
 * method, path in OpenAPI's form, auth, the zod schema the route validates its body
 * with (`named(...)`: shown once under components), its answers and errors.
 */

// ---- Named schemas: each is one `#/components/schemas/<name>` ------------------

const S = {
  // Requests (io "input": what a client may send).
  ChatCompletionRequest: named(
    "ChatCompletionRequest",
    ChatCompletionRequest,
    "The subset of OpenAI's chat-completions request Agentix accepts. Any other field, of the request or of a message, is refused " +
      "(400 `unsupported_parameter`) unless the tenant's plan lists it in `allowed_extensions` (`messages.<key>` for a message field).",
  ),
  ChatMessage: named("ChatMessage", ChatMessage),
  CompletionRequest: named(
    "CompletionRequest",
    CompletionRequest,
    "OpenAI's legacy completions request as Agentix accepts it. Other fields are refused unless the tenant's plan allows them.",
  ),
  ToolCall: named("ToolCall", ToolCall),
  ToolDefinition: named("ToolDefinition", ToolDefinition),
  MessagesRequest: named(
    "MessagesRequest",
    MessagesRequest,
    "The subset of Anthropic's Messages request Agentix accepts (served by translation to chat completions). Other fields are refused unless the tenant's plan allows them.",
  ),
  MessageParam: named("MessageParam", MessageParam),
  ToolParam: named("ToolParam", ToolParam),
  CountTokensRequest: named("CountTokensRequest", CountTokensRequest),
  ResponsesRequest: named(
    "ResponsesRequest",
    ResponsesRequest,
    "The subset of OpenAI's Responses request Agentix accepts (served by translation to chat completions). `previous_response_id` continues a stored response and joins its program. Other fields are refused unless the tenant's plan allows them.",
  ),
  ToolEventsBody: named("ToolEventsBody", ToolEventsBody, `One tool event, or \`{"events": [...]}\` with 1–${MAX_TOOL_EVENTS_PER_BATCH}.`),
  EndThreadBody: named("EndThreadBody", EndThreadBody, "Optional: an empty body ends the thread as abandoned."),
  ToolEvent: named("ToolEvent", ToolEvent),
  ToolStartedEvent: named("ToolStartedEvent", ToolStartedEvent),
  ToolFinishedEvent: named("ToolFinishedEvent", ToolFinishedEvent),
  ToolEventBatch: named("ToolEventBatch", ToolEventBatch),
  CreatePlanBody: named("CreatePlanBody", CreatePlanBody),
  UpdatePlanBody: named("UpdatePlanBody", UpdatePlanBody, "Any of the plan's fields but `id`; at least one."),
  CreateTenantBody: named("CreateTenantBody", CreateTenantBody, "`plan` defaults to `free`."),
  UpdateTenantBody: named("UpdateTenantBody", UpdateTenantBody, "At least one field."),
  TenantOverridesBody: named(
    "TenantOverridesBody",
    TenantOverridesBody,
    "Each field: a value overrides the plan's (a list replaces the plan's extensions), null goes back to the plan's value, absent leaves it as is. At least one.",
  ),
  CreateKeyBody: named("CreateKeyBody", CreateKeyBody),
  CreatePoolBody: named("CreatePoolBody", CreatePoolBody),
  UpdatePoolBody: named("UpdatePoolBody", UpdatePoolBody, "Any of the pool's fields but `id`; at least one."),

  // Answers (io "output").
  ChatCompletion: named("ChatCompletion", ChatCompletion, "OpenAI's chat.completion object, as the engine produced it."),
  ChatCompletionChunk: named("ChatCompletionChunk", ChatCompletionChunk, "One event of a streamed completion."),
  TextCompletion: named("TextCompletion", TextCompletion, "OpenAI's text_completion object (also each event of its stream)."),
  Usage: named("Usage", Usage),
  MessagesResponse: named("MessagesResponse", MessagesResponse, "Anthropic's message object."),
  MessagesStreamEvent: named("MessagesStreamEvent", MessagesStreamEvent, "One event of a streamed message (`event: <type>` then `data: <this>`)."),
  MessagesError: named("MessagesError", MessagesErrorBody, "Anthropic's error shape, which every error of the Messages API has."),
  CountTokensResponse: named("CountTokensResponse", CountTokensResponse),
  ResponseObject: named("ResponseObject", ResponseObject, "OpenAI's response object; its ID names the call's program, so a later previous_response_id joins it."),
  ResponseStreamEvent: named("ResponseStreamEvent", ResponseStreamEvent, "One event of a streamed response (`event: <type>` then `data: <this>`)."),
  Health: named("Health", Health),
  Program: named("Program", ProgramObject),
  ProgramThread: named("ProgramThread", ThreadObject, "One thread (branch) of a program."),
  ThreadEndAnswer: named("ThreadEndAnswer", ThreadEndAnswer, "The ended thread."),
  ProgramTools: named("ProgramTools", ToolsObject, "What the client said about the program's tools."),
  ToolEventsAnswer: named("ToolEventsAnswer", ToolEventsAnswer),
  UsageFigures: named("UsageFigures", UsageFigures),
  UsageReport: named("UsageReport", UsageReport),
  UsageExport: named("UsageExport", UsageExport),
  Model: named("Model", ModelObject),
  ModelList: named("ModelList", ModelList),
  Plan: named("Plan", PlanObject),
  PlanList: named("PlanList", PlanList),
  Pool: named("Pool", PoolObject),
  PoolHealth: named("PoolHealth", PoolHealth),
  PoolList: named("PoolList", PoolList),
  Tenant: named("Tenant", TenantObject),
  TenantLimits: named("TenantLimits", TenantLimits),
  TenantList: named("TenantList", TenantList),
  TenantLedger: named("TenantLedger", TenantLedgerObject),
  ApiKey: named("ApiKey", ApiKeyObject),
  CreatedApiKey: named("CreatedApiKey", CreatedApiKeyObject),
  ApiKeyList: named("ApiKeyList", ApiKeyList),
};

// ---- Response headers (names from protocol/headers.ts only) ---------------------

const count = z.int().nonnegative();

export const RESPONSE_HEADERS: Record<string, HeaderSpec> = {
  [Header.program]: { description: "The program the call or request belongs to (a new one's ID when the call started it).", schema: z.string().regex(PROGRAM_ID) },
  [Header.pool]: { description: "The directory ID of the pool that took the call; absent when none did.", schema: z.string() },
  [Header.programSource]: {
    description: "How the call found its program: `header` (x-agentix-program), `previous_response_id` (the program of the response it continues), `new`.",
    schema: z.enum(PROGRAM_SOURCES),
  },
  [Header.requestId]: { description: "The call's ID (OpenAI's clients show it as the request ID).", schema: z.string() },
  [Header.tokenCountSource]: { description: "On count_tokens: engine (an engine's tokenizer counted) or estimate (no pool could; the edge's estimate).", schema: z.enum(["engine", "estimate"]) },
  [RateLimitHeader.limitRequests]: { description: "Requests a minute the tenant may make.", schema: count },
  [RateLimitHeader.remainingRequests]: { description: "Requests left in the bucket.", schema: count },
  [RateLimitHeader.resetRequests]: { description: 'Time until the requests bucket is full again, in OpenAI\'s form ("6s", "1m0s", "17ms").', schema: z.string() },
  [RateLimitHeader.limitTokens]: { description: "Tokens a minute the tenant may use.", schema: count },
  [RateLimitHeader.remainingTokens]: { description: "Tokens left in the bucket, after this call's reservation.", schema: count },
  [RateLimitHeader.resetTokens]: { description: "Time until the tokens bucket is full again, in OpenAI's form.", schema: z.string() },
  [RateLimitHeader.retryAfter]: { description: "Seconds to wait before retrying.", schema: z.int().nonnegative() },
  // The Messages API's, under Anthropic's names; resets are RFC 3339 times.
  [AnthropicHeader.requestId]: { description: "The call's ID, as Anthropic's clients read it (same as x-request-id).", schema: z.string() },
  [AnthropicHeader.requestsLimit]: { description: "Requests a minute the tenant may make.", schema: count },
  [AnthropicHeader.requestsRemaining]: { description: "Requests left in the bucket.", schema: count },
  [AnthropicHeader.requestsReset]: { description: "When the requests bucket is full again (RFC 3339).", schema: z.iso.datetime() },
  [AnthropicHeader.tokensLimit]: { description: "Tokens a minute the tenant may use.", schema: count },
  [AnthropicHeader.tokensRemaining]: { description: "Tokens left in the bucket, after this call's reservation.", schema: count },
  [AnthropicHeader.tokensReset]: { description: "When the tokens bucket is full again (RFC 3339).", schema: z.iso.datetime() },
};

const RATE_LIMIT_HEADERS = [
  RateLimitHeader.limitRequests,
  RateLimitHeader.remainingRequests,
  RateLimitHeader.resetRequests,
  RateLimitHeader.limitTokens,
  RateLimitHeader.remainingTokens,
  RateLimitHeader.resetTokens,
] as const;
const ANTHROPIC_RATE_LIMIT_HEADERS = [
  AnthropicHeader.requestsLimit,
  AnthropicHeader.requestsRemaining,
  AnthropicHeader.requestsReset,
  AnthropicHeader.tokensLimit,
  AnthropicHeader.tokensRemaining,
  AnthropicHeader.tokensReset,
] as const;
const CALL_HEADERS = [Header.program, Header.programSource, Header.requestId, Header.pool] as const;

// ---- Errors shared by several operations ----------------------------------------

const PROGRAM_ID_400 = "`invalid_program_id`: the path's program ID is not one.";
const PROGRAM_404 = "`program_not_found`: no such program of this tenant (another tenant's gets the same answer).";
const BODY_413 = "`request_too_large`.";
const ADMIN_BODY_400 = "`invalid_json`, `invalid_request` (`param` names the field; unknown fields are refused).";

/** What every model-calling API shares: program headers, limits, pool errors. */
const CALL_ERRORS: OperationSpec["errors"] = {
  400:
    "`invalid_json`, `invalid_request`, `unsupported_parameter` (a field the plan does not allow), `invalid_program_id`, `invalid_thread`, " +
    "`unknown_parent_thread`, `parent_thread_mismatch`, `max_tokens_above_plan_limit`, `max_tokens_exceeds_budget`.",
  404: "`model_not_found` (no pool the plan may use serves it), `program_not_found`.",
  409: "`program_ended`, `program_expired`: omit x-agentix-program to start a new program.",
  413: BODY_413,
  429:
    "`rate_limit_exceeded` (rpm or tpm), `concurrency_limit_exceeded`, `active_programs_limit_exceeded`, `request_exceeds_tokens_per_minute`, " +
    "`budget_held_by_calls_in_flight`, `budget_exhausted` (type `insufficient_quota`).",
  502: "`pool_unreachable`, `pool_rejected_edge`, or the pool's own error.",
  503: "`no_pool_available`: no pool the plan may use can take the call now.",
  504: "`call_timeout`: the call ran past its time limit.",
};

/**
 * A model-calling route (routes/calls.ts): every one takes the program headers,
 * answers JSON or (stream: true) server-sent events, and carries the rate-limit
 * headers on every answer. A new API (e.g. /v1/responses) is one more call in OPERATIONS.
 */
function callOperation(call: {
  path: string;
  operationId: string;
  summary: string;
  /** Which API, for the description. */
  api: string;
  request: Named;
  answer: Named;
  /** One event of its stream. */
  chunk: Named;
  /** How its stream is framed, when not OpenAI's (`data:` lines, then `data: [DONE]`). */
  stream?: string;
  /** Replaces CALL_ERRORS' descriptions (an API whose errors have another shape). */
  errors?: OperationSpec["errors"];
  errorSchema?: Named;
  /** More headers: on every answer, and on the successful one. */
  headersOnEvery?: readonly string[];
  headersOnSuccess?: readonly string[];
}): OperationSpec {
  return {
    method: "post",
    path: call.path,
    operationId: call.operationId,
    summary: call.summary,
    description:
      `${call.api}, within a program. Without \`x-agentix-program\` the call starts a program. ` +
      "Admitted against the tenant's limits, forwarded to a pool serving the model in a region the plan allows, relayed, and billed. " +
      "Every answer to an authenticated tenant carries the `x-ratelimit-*` headers.",
    tags: ["Calls"],
    auth: "tenant",
    headers: ProgramCallHeaders,
    body: { schema: call.request },
    headersOnEvery: [...RATE_LIMIT_HEADERS, ...(call.headersOnEvery ?? [])],
    ...(call.errorSchema ? { errorSchema: call.errorSchema } : {}),
    responses: {
      200: {
        description: "The answer: JSON, or with `stream: true` server-sent events.",
        json: call.answer,
        media: {
          "text/event-stream": {
            schema: {
              type: "string",
              description: call.stream ?? `Server-sent events: each \`data:\` a ${call.chunk.name}, then \`data: [DONE]\`.`,
            },
            item: call.chunk,
          },
        },
        headers: [...CALL_HEADERS, ...(call.headersOnSuccess ?? [])],
      },
    },
    errors: { ...CALL_ERRORS, ...call.errors },
  };
}

/** The Messages API's errors: Anthropic's shape has a type and a message, no code. */
const MESSAGES_ERRORS: OperationSpec["errors"] = {
  400: "`invalid_request_error`: a malformed body or header, a field the plan does not allow, a limit above the plan's or the budget.",
  404: "`not_found_error`: a model no pool the plan may use serves, or an unknown program.",
  409: "`invalid_request_error`: the program has ended or expired.",
  413: "`request_too_large`.",
  429: "`rate_limit_error`: a rate, concurrency, active-programs or budget limit.",
  502: "`api_error`: the pool could not be reached or refused the edge.",
  503: "`overloaded_error`: no pool the plan may use can take the call now.",
  504: "`api_error`: the call ran past its time limit.",
};

const JSON_OBJECT = { schema: { type: "object", description: "This document (OpenAPI 3.1)." } };

export const OPERATIONS: readonly OperationSpec[] = [
  // ---- Public -------------------------------------------------------------------
  {
    method: "get",
    path: "/health",
    operationId: "health",
    summary: "Liveness",
    tags: ["Meta"],
    auth: "public",
    responses: { 200: { description: "The edge is up.", json: S.Health } },
  },
  {
    method: "get",
    path: "/openapi.json",
    operationId: "getOpenApiDocument",
    summary: "This OpenAPI document",
    tags: ["Meta"],
    auth: "public",
    responses: { 200: { description: "The OpenAPI 3.1 document of this API.", media: { "application/json": JSON_OBJECT } } },
  },
  {
    method: "get",
    path: "/docs",
    operationId: "getApiReference",
    summary: "The API reference, rendered",
    tags: ["Meta"],
    auth: "public",
    responses: { 200: { description: "An HTML page rendering /openapi.json.", media: { "text/html": { schema: { type: "string" } } } } },
  },

  // ---- Tenant API ---------------------------------------------------------------
  callOperation({
    path: "/v1/chat/completions",
    operationId: "createChatCompletion",
    summary: "Create a chat completion",
    api: "OpenAI's chat completions",
    request: S.ChatCompletionRequest,
    answer: S.ChatCompletion,
    chunk: S.ChatCompletionChunk,
  }),
  callOperation({
    path: "/v1/completions",
    operationId: "createCompletion",
    summary: "Create a completion (legacy)",
    api: "OpenAI's legacy completions (one prompt, one choice)",
    request: S.CompletionRequest,
    answer: S.TextCompletion,
    chunk: S.TextCompletion,
  }),
  callOperation({
    path: "/v1/messages",
    operationId: "createMessage",
    summary: "Create a message (Anthropic)",
    api: "Anthropic's Messages API (translated to chat completions for the engine)",
    request: S.MessagesRequest,
    answer: S.MessagesResponse,
    chunk: S.MessagesStreamEvent,
    stream: "Server-sent events in Anthropic's form: `event: <type>` and `data:` a MessagesStreamEvent, from message_start to message_stop.",
    errors: MESSAGES_ERRORS,
    errorSchema: S.MessagesError,
    headersOnEvery: ANTHROPIC_RATE_LIMIT_HEADERS,
    headersOnSuccess: [AnthropicHeader.requestId],
  }),
  callOperation({
    path: "/v1/responses",
    operationId: "createResponse",
    summary: "Create a response",
    api: "OpenAI's Responses API (translated to chat completions for the engine)",
    request: S.ResponsesRequest,
    answer: S.ResponseObject,
    chunk: S.ResponseStreamEvent,
    stream: "Server-sent events in the Responses form: `event: <type>` and `data:` a ResponseStreamEvent, numbered, from response.created to response.completed (or .incomplete/.failed).",
  }),
  {
    method: "post",
    path: "/v1/messages/count_tokens",
    operationId: "countMessageTokens",
    summary: "Count a Messages request's input tokens (Anthropic)",
    description:
      "Counted by an engine's tokenizer and chat template at the pool a new program would use (the count the call is billed on), outside the queue; when no pool can count, the edge's estimate (four characters a token). x-agentix-token-count-source says which. Uses no quota.",
    tags: ["Calls"],
    auth: "tenant",
    body: { schema: S.CountTokensRequest },
    errorSchema: S.MessagesError,
    responses: { 200: { description: "The count.", json: S.CountTokensResponse, headers: [Header.tokenCountSource] } },
    errors: {
      400: "`invalid_request_error`: a malformed body or a field it does not take.",
      404: "`not_found_error`: a model no pool the plan may use serves.",
      413: "`request_too_large`.",
    },
  },
  {
    method: "post",
    path: "/v1/programs",
    operationId: "createProgram",
    summary: "Start a program",
    description: "Within the tenant's active-programs limit. A chat call without x-agentix-program also starts one.",
    tags: ["Programs"],
    auth: "tenant",
    responses: { 201: { description: "The new program.", json: S.Program, headers: [Header.program] } },
    errors: { 429: "`active_programs_limit_exceeded`." },
  },
  {
    method: "get",
    path: "/v1/programs/{programId}",
    operationId: "getProgram",
    summary: "A program's state",
    tags: ["Programs"],
    auth: "tenant",
    responses: { 200: { description: "The program.", json: S.Program, headers: [Header.program] } },
    errors: { 400: PROGRAM_ID_400, 404: PROGRAM_404 },
  },
  {
    method: "delete",
    path: "/v1/programs/{programId}",
    operationId: "endProgram",
    summary: "End a program",
    description: "Idempotent: its figures become final.",
    tags: ["Programs"],
    auth: "tenant",
    responses: { 200: { description: "The program's final state.", json: S.Program, headers: [Header.program] } },
    errors: { 400: PROGRAM_ID_400, 404: PROGRAM_404 },
  },
  {
    method: "delete",
    path: "/v1/programs/{programId}/threads/{thread}",
    operationId: "endThread",
    summary: "End one thread (branch) of a program",
    description:
      "The agent is done with the branch (abandoned, or merged into another thread): the pools that hold its context may evict it first. " +
      "Idempotent (a thread keeps its first end). A later call on the thread reopens it at a new context generation.",
    tags: ["Programs"],
    auth: "tenant",
    body: { schema: S.EndThreadBody, required: false },
    responses: { 200: { description: "The ended thread.", json: S.ThreadEndAnswer, headers: [Header.program] } },
    errors: {
      400: `\`invalid_json\`, \`invalid_request\` (\`param\` names the field), \`invalid_thread\`, ${PROGRAM_ID_400}`,
      404: `${PROGRAM_404} \`thread_not_found\`: the program has no such thread.`,
      409: "`program_ended`, `program_expired`: the program is over, and its threads with it.",
      413: BODY_413,
    },
  },
  {
    method: "post",
    path: "/v1/programs/{programId}/events",
    operationId: "recordToolEvents",
    summary: "Tell Agentix a tool started or finished",
    description:
      "Hints, so the pool can predict when the program's next call comes. Not counted toward rpm; capped per program and per tenant. " +
      "Validated whole before any state is touched.",
    tags: ["Tool events"],
    auth: "tenant",
    body: { schema: S.ToolEventsBody },
    responses: { 202: { description: "Recorded; carried to the program's pool in the background.", json: S.ToolEventsAnswer, headers: [Header.program] } },
    errors: {
      400: `\`invalid_json\`, \`invalid_request\` (\`param\` names the field, e.g. \`events.2.deadline\`), ${PROGRAM_ID_400}`,
      404: PROGRAM_404,
      409: "`program_ended`, `program_expired`.",
      413: BODY_413,
      429: "`tool_events_rate_exceeded`: the program's or the tenant's events-a-minute cap.",
    },
  },
  {
    method: "get",
    path: "/v1/usage",
    operationId: "getUsage",
    summary: "The tenant's own usage",
    description: "Metered usage by UTC day or by program, with totals. A call counts on the day it settled.",
    tags: ["Usage"],
    auth: "tenant",
    query: UsageQueryParams,
    responses: { 200: { description: "Usage in the range.", json: S.UsageReport } },
    errors: { 400: "`invalid_request`: an unknown parameter, a bad date, `to` before `from`, or a range too long (`param` names it)." },
  },
  {
    method: "get",
    path: "/v1/models",
    operationId: "listModels",
    summary: "Models the tenant may call",
    description: "Allowed by its plan and served by an active or draining pool in a region the plan allows; sorted by id.",
    tags: ["Models"],
    auth: "tenant",
    responses: { 200: { description: "The models.", json: S.ModelList } },
  },
  {
    method: "get",
    path: "/v1/models/{model}",
    operationId: "getModel",
    summary: "One model",
    tags: ["Models"],
    auth: "tenant",
    responses: { 200: { description: "The model.", json: S.Model } },
    errors: { 404: "`model_not_found` (type `invalid_request_error`, param `model`)." },
  },

  // ---- Admin: plans -------------------------------------------------------------
  {
    method: "get",
    path: "/admin/plans",
    operationId: "listPlans",
    summary: "List plans",
    tags: ["Admin: plans"],
    auth: "admin",
    responses: { 200: { description: "Every plan.", json: S.PlanList } },
  },
  {
    method: "post",
    path: "/admin/plans",
    operationId: "createPlan",
    summary: "Create a plan",
    tags: ["Admin: plans"],
    auth: "admin",
    body: { schema: S.CreatePlanBody },
    responses: { 201: { description: "The new plan.", json: S.Plan } },
    errors: { 400: ADMIN_BODY_400, 409: "`plan_exists`.", 413: BODY_413 },
  },
  {
    method: "get",
    path: "/admin/plans/{planId}",
    operationId: "getPlan",
    summary: "One plan",
    tags: ["Admin: plans"],
    auth: "admin",
    responses: { 200: { description: "The plan.", json: S.Plan } },
    errors: { 404: "`plan_not_found`." },
  },
  {
    method: "patch",
    path: "/admin/plans/{planId}",
    operationId: "updatePlan",
    summary: "Update a plan",
    description: "Applies from each of its tenants' next request.",
    tags: ["Admin: plans"],
    auth: "admin",
    body: { schema: S.UpdatePlanBody },
    responses: { 200: { description: "The updated plan.", json: S.Plan } },
    errors: { 400: ADMIN_BODY_400, 404: "`plan_not_found`.", 413: BODY_413 },
  },

  // ---- Admin: pools -------------------------------------------------------------
  {
    method: "get",
    path: "/admin/pools",
    operationId: "listPools",
    summary: "The pool directory",
    description: "Every pool, with the pool monitor's last reading of it.",
    tags: ["Admin: pools"],
    auth: "admin",
    responses: { 200: { description: "Every pool.", json: S.PoolList } },
  },
  {
    method: "post",
    path: "/admin/pools",
    operationId: "createPool",
    summary: "Add a pool",
    tags: ["Admin: pools"],
    auth: "admin",
    body: { schema: S.CreatePoolBody },
    responses: { 201: { description: "The new pool.", json: S.Pool } },
    errors: { 400: ADMIN_BODY_400, 409: "`pool_exists`.", 413: BODY_413 },
  },
  {
    method: "get",
    path: "/admin/pools/{poolId}",
    operationId: "getPool",
    summary: "One pool",
    tags: ["Admin: pools"],
    auth: "admin",
    responses: { 200: { description: "The pool.", json: S.Pool } },
    errors: { 404: "`pool_not_found`." },
  },
  {
    method: "patch",
    path: "/admin/pools/{poolId}",
    operationId: "updatePool",
    summary: "Update a pool",
    tags: ["Admin: pools"],
    auth: "admin",
    body: { schema: S.UpdatePoolBody },
    responses: { 200: { description: "The updated pool.", json: S.Pool } },
    errors: { 400: ADMIN_BODY_400, 404: "`pool_not_found`.", 413: BODY_413 },
  },
  {
    method: "post",
    path: "/admin/pools/{poolId}/{action}",
    operationId: "setPoolStatus",
    summary: "Activate, drain or disable a pool",
    description: "drain: serve the programs it has, take no new ones; disable: take nothing. Pools are never deleted.",
    tags: ["Admin: pools"],
    auth: "admin",
    responses: { 200: { description: "The pool with its new status.", json: S.Pool } },
    errors: { 404: "`pool_not_found`; `unknown_route` for another action." },
  },

  // ---- Admin: tenants and overrides ---------------------------------------------
  {
    method: "post",
    path: "/admin/tenants",
    operationId: "createTenant",
    summary: "Create a tenant",
    tags: ["Admin: tenants"],
    auth: "admin",
    body: { schema: S.CreateTenantBody },
    responses: { 201: { description: "The new tenant.", json: S.Tenant } },
    errors: { 400: `${ADMIN_BODY_400} \`unknown_plan\`.`, 413: BODY_413 },
  },
  {
    method: "get",
    path: "/admin/tenants",
    operationId: "listTenants",
    summary: "List tenants",
    tags: ["Admin: tenants"],
    auth: "admin",
    responses: { 200: { description: "Every tenant, with its plan, overrides and limits in force.", json: S.TenantList } },
  },
  {
    method: "get",
    path: "/admin/tenants/{tenantId}",
    operationId: "getTenant",
    summary: "One tenant",
    tags: ["Admin: tenants"],
    auth: "admin",
    responses: { 200: { description: "The tenant.", json: S.Tenant } },
    errors: { 404: "`tenant_not_found`." },
  },
  {
    method: "patch",
    path: "/admin/tenants/{tenantId}",
    operationId: "updateTenant",
    summary: "Rename a tenant, set its plan or weight",
    tags: ["Admin: tenants"],
    auth: "admin",
    body: { schema: S.UpdateTenantBody },
    responses: { 200: { description: "The updated tenant.", json: S.Tenant } },
    errors: { 400: `${ADMIN_BODY_400} \`unknown_plan\`.`, 404: "`tenant_not_found`.", 413: BODY_413 },
  },
  {
    method: "get",
    path: "/admin/tenants/{tenantId}/ledger",
    operationId: "getTenantLedger",
    summary: "A tenant's usage ledger: pending and quarantined rows",
    description:
      "What the tenant's usage ledger objects hold that D1 does not yet: rows pending (sent within LEDGER_FLUSH_MS while D1 answers) " +
      "and rows D1 refused (a constraint), quarantined and retried every 10 min, with D1's last error.",
    tags: ["Admin: tenants"],
    auth: "admin",
    responses: { 200: { description: "Per ledger object, its pending and quarantined items.", json: S.TenantLedger } },
    errors: { 404: "`tenant_not_found`.", 503: "`ledger_unavailable`: a ledger object did not answer." },
  },
  {
    method: "patch",
    path: "/admin/tenants/{tenantId}/overrides",
    operationId: "setTenantOverrides",
    summary: "Override a tenant's plan limits",
    tags: ["Admin: tenants"],
    auth: "admin",
    body: { schema: S.TenantOverridesBody },
    responses: { 200: { description: "The tenant with its new overrides and limits.", json: S.Tenant } },
    errors: { 400: ADMIN_BODY_400, 404: "`tenant_not_found`.", 413: BODY_413 },
  },

  // ---- Admin: keys --------------------------------------------------------------
  {
    method: "post",
    path: "/admin/tenants/{tenantId}/keys",
    operationId: "createApiKey",
    summary: "Create an API key",
    description: "The answer is the only time the key itself is shown. A tenant may hold several active keys (rotation).",
    tags: ["Admin: keys"],
    auth: "admin",
    body: { schema: S.CreateKeyBody, required: false },
    responses: { 201: { description: "The new key, with `key`.", json: S.CreatedApiKey } },
    errors: { 400: ADMIN_BODY_400, 404: "`tenant_not_found`.", 413: BODY_413 },
  },
  {
    method: "get",
    path: "/admin/tenants/{tenantId}/keys",
    operationId: "listApiKeys",
    summary: "A tenant's API keys",
    description: "Prefixes and dates; never a key or its hash.",
    tags: ["Admin: keys"],
    auth: "admin",
    responses: { 200: { description: "The tenant's keys, oldest first.", json: S.ApiKeyList } },
    errors: { 404: "`tenant_not_found`." },
  },
  {
    method: "delete",
    path: "/admin/keys/{keyId}",
    operationId: "revokeApiKey",
    summary: "Revoke an API key",
    description: "Refused from the next request. Idempotent: revoking again keeps the first revocation time.",
    tags: ["Admin: keys"],
    auth: "admin",
    responses: { 200: { description: "The revoked key.", json: S.ApiKey } },
    errors: { 404: "`api_key_not_found`." },
  },

  // ---- Admin: usage export ------------------------------------------------------
  {
    method: "get",
    path: "/admin/usage/export",
    operationId: "exportUsage",
    summary: "Billing export for a month",
    description:
      "One line per tenant (zeros included) for a calendar month (UTC, by settle time), and the ledger's own totals. " +
      "CSV: columns period,tenant_id,tenant_name,plan,calls,prompt_tokens,cached_tokens,completion_tokens,total_tokens,service_ms; the last line's tenant_id is TOTAL.",
    tags: ["Admin: usage"],
    auth: "admin",
    query: UsageExportQueryParams,
    responses: {
      200: {
        description: "The export: JSON (format=json, the default) or CSV (format=csv, RFC 4180).",
        json: S.UsageExport,
        media: { "text/csv": { schema: { type: "string" } } },
      },
    },
    errors: { 400: "`invalid_request`: a bad period or format, or an unknown parameter." },
  },
];

export const DOCUMENT_SPEC: DocumentSpec = {
  info: {
    title: "Agentix API",
    version: packageVersion,
    description: [
      "Program-aware, OpenAI-compatible LLM serving for agent programs.",
      "",
      "**Tenant API** (`/v1`): `Authorization: Bearer agx_…`. Chat calls belong to a *program* (`x-agentix-program`; absent: a new one) " +
        "and run on one of its threads (`x-agentix-thread`, default `main`; `x-agentix-parent-thread` forks a thread). " +
        "**Admin API** (`/admin`): `Authorization: Bearer <ADMIN_TOKEN>`.",
      "",
      'Every error has OpenAI\'s shape: `{"error": {"message", "type", "code", "param"}}` (schema OpenAIError). ' +
        "Over a limit: 429 with `Retry-After`.",
    ].join("\n"),
  },
  tags: [
    { name: "Calls", description: "Model calls, in OpenAI's shapes." },
    { name: "Programs", description: "An agent program: the calls and tools of one run, scheduled together." },
    { name: "Tool events", description: "Tool started / finished hints for a program." },
    { name: "Usage", description: "The tenant's own metered usage." },
    { name: "Models", description: "The models the tenant may call." },
    { name: "Admin: tenants", description: "Tenants, their plan and their limit overrides." },
    { name: "Admin: keys", description: "Tenants' API keys." },
    { name: "Admin: plans", description: "Plans: limits, extensions, models and regions." },
    { name: "Admin: pools", description: "The pool directory." },
    { name: "Admin: usage", description: "Billing export." },
    { name: "Meta", description: "Health and this document." },
  ],
  operations: OPERATIONS,
  responseHeaders: RESPONSE_HEADERS,
  components: {
    input: [S.MessageParam, S.ToolParam, S.ChatMessage, S.ToolCall, S.ToolDefinition, S.ToolEvent, S.ToolStartedEvent, S.ToolFinishedEvent, S.ToolEventBatch],
    output: [S.Usage, S.ProgramTools, S.UsageFigures, S.PoolHealth, S.TenantLimits],
  },
};
