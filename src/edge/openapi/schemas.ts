import { z } from "zod";
import { DEFAULT_THREAD, Header } from "../../protocol/headers.js";
import { PROGRAM_ID, THREAD_NAME } from "../../protocol/ids.js";
import { ToolEvent, ToolEventBatch } from "../../protocol/tool-events.js";
import { PROGRAM_STATUSES } from "../db/schema.js";
import { THREAD_END_OUTCOMES } from "../../protocol/threads.js";
import type { ProgramView, ThreadView, toolsView } from "../program/view.js";
import { PLAN_ID } from "../routes/admin/bodies.js";
import { ApiKeyObject, PlanObject, PoolObject, TenantObject } from "../routes/admin/views.js";
import type { FiguresView } from "../usage/figures.js";

/*
 * Schemas of what the edge answers where the route builds its answer inline (no zod
 * schema of its own), for the OpenAPI document. Where the answer comes from a view
 * function, the `Exactly` checks at the bottom tie the schema to the view's return
 * type: a field added to one and not the other does not type-check. Request bodies
 * are never described here: the document uses the schemas the routes validate with
 * (protocol/chat.ts, protocol/tool-events.ts, routes/admin/bodies.ts).
 */

const epochMs = z.int().nonnegative().describe("Epoch milliseconds.");
const nullableMs = epochMs.nullable();
const count = z.int().nonnegative();

/** OpenAI's list envelope. */
const listOf = <T extends z.ZodType>(item: T) => z.object({ object: z.literal("list"), data: z.array(item) });

export const Health = z.object({ ok: z.literal(true) });

// ---- Programs and tool events ---------------------------------------------------

export const ToolsObject = z.object({
  in_flight: z
    .array(
      z.object({
        tool: z.string().nullable(),
        tool_call_id: z.string().nullable(),
        thread: z.string(),
        started_at: epochMs,
        expected_duration_ms: z.number().nonnegative().nullable(),
        deadline: nullableMs,
      }),
    )
    .describe("Tools running now, oldest first (at most 64)."),
  last_started_at: nullableMs,
  last_finished_at: nullableMs,
  threads: z
    .array(z.object({ name: z.string(), last_started_at: nullableMs, last_finished_at: nullableMs }))
    .describe("Most recently updated first (at most 64)."),
  events: z.object({ tool_started: count, tool_finished: count }),
});

export const ThreadObject = z.object({
  name: z.string(),
  parent: z.string().nullable(),
  in_flight: count,
  calls: count,
  service_ms: z.number(),
  context_generation: count.describe(
    "One more each time a call no longer extended the thread's previous call (its history compacted or rewritten), or reopened the ended thread.",
  ),
  ended_at: nullableMs.describe("When the agent ended the thread (DELETE /v1/programs/{id}/threads/{thread}); null while open."),
  outcome: z.enum(THREAD_END_OUTCOMES).nullable().describe("How the agent said the thread ended; null while open."),
});

export const ProgramObject = z.object({
  id: z.string(),
  object: z.literal("program"),
  status: z.enum(PROGRAM_STATUSES),
  created_at: epochMs,
  ended_at: nullableMs,
  last_activity_at: epochMs,
  service_ms: z.number().nonnegative().describe("PLAS: total service the program's calls received (ms)."),
  path_ms: z.number().nonnegative().describe("ATLAS: the program's critical-path service (ms)."),
  wait_ms: z.number().nonnegative(),
  engine: z.string().nullable().describe("The engine that served the program last (cache affinity), or null."),
  in_flight: count,
  totals: z.object({ calls: count, prompt_tokens: count, cached_tokens: count, completion_tokens: count }),
  threads: z.array(ThreadObject).describe("Empty once the program has ended or expired."),
  tools: ToolsObject,
});

/** The answer to DELETE /v1/programs/{programId}/threads/{thread}. */
export const ThreadEndAnswer = ThreadObject.extend({ object: z.literal("program.thread"), program_id: z.string() });

/** The body of POST /v1/programs/{programId}/events: one event, or a batch. */
export const ToolEventsBody = z.union([ToolEvent, ToolEventBatch]);

export const ToolEventsAnswer = z.object({
  object: z.literal("program.tool_events"),
  program_id: z.string(),
  accepted: count,
  tools: ToolsObject,
});

// ---- Usage ----------------------------------------------------------------------

export const UsageFigures = z.object({
  calls: count,
  prompt_tokens: count,
  cached_tokens: count,
  completion_tokens: count,
  total_tokens: count,
  service_ms: z.number().nonnegative().describe("Rounded to 0.001 ms."),
});

/** How far behind the ledger may be (usage/freshness.ts). */
const LedgerFreshness = {
  data_as_of: z.string().describe("ISO 8601: every call settled before this instant is counted (usage rows reach D1 in batches)."),
  ledger_delay_ms: z.int().nonnegative().describe("The most a settled call's row waits before it is counted, while D1 answers (ms)."),
  ledger_quarantined_rows: count.describe(
    "Usage rows D1 refused (a constraint), kept in the ledger and retried every 10 min: calls settled before data_as_of that are not in the figures.",
  ),
  ledger_quarantined_since: z.string().nullable().describe("ISO 8601: when the oldest of them was first refused; null: none."),
};

export const UsageReport = z.object({
  object: z.literal("list"),
  ...LedgerFreshness,
  group_by: z.enum(["day", "program"]),
  from: z.string().describe("First day, inclusive (UTC), YYYY-MM-DD."),
  to: z.string().describe("Last day, inclusive (UTC), YYYY-MM-DD."),
  data: z.array(
    z.union([
      UsageFigures.extend({ day: z.string().describe("YYYY-MM-DD (UTC), group_by=day.") }),
      UsageFigures.extend({ program_id: z.string().describe("group_by=program.") }),
    ]),
  ),
  totals: UsageFigures,
});


/** GET /v1/usage's query: the route's own parameters. */
export { UsageQueryParams } from "../routes/usage.js";

export const UsageExportLine = UsageFigures.extend({
  tenant_id: z.string(),
  tenant_name: z.string(),
  plan: z.string().describe("The tenant's plan now, not necessarily during the period."),
});

export const UsageExport = z.object({
  object: z.literal("usage_export"),
  period: z.string().describe("YYYY-MM"),
  ...LedgerFreshness,
  from: z.string().describe("ISO 8601: the period's start (UTC)."),
  to: z.string().describe("ISO 8601: the period's end (UTC), exclusive."),
  data: z.array(UsageExportLine).describe("One line per tenant, zeros included."),
  totals: UsageFigures.describe("The ledger's own totals for the period."),
});

/** GET /admin/usage/export's query: the route's own. */
export { ExportQuery as UsageExportQueryParams } from "../routes/admin/usage-export.js";

// ---- Models ---------------------------------------------------------------------

export const ModelObject = z.object({
  id: z.string(),
  object: z.literal("model"),
  created: z.int().nonnegative().describe("Epoch seconds: when the earliest pool still serving it was added."),
  owned_by: z.string(),
});
export const ModelList = listOf(ModelObject);

// ---- Admin lists ----------------------------------------------------------------

export const PlanList = listOf(PlanObject);
export const PoolList = listOf(PoolObject);
export const TenantList = listOf(TenantObject);
export const ApiKeyList = listOf(ApiKeyObject);

// ---- Parameters -----------------------------------------------------------------

/**
 * Every path parameter the routes use, by the name the route gives it (`:programId`
 * is `{programId}`). A route with a parameter not named here fails the document build.
 */
export const PATH_PARAMETERS: Record<string, z.ZodType> = {
  programId: z.string().regex(PROGRAM_ID).describe("A program ID: prog_ and 8–64 letters or digits."),
  thread: z.string().regex(THREAD_NAME).describe("A thread name: 1–64 letters, digits, or . _ : -"),
  model: z.string().min(1).describe('A model name. A "/" in it may be sent as is or as %2F.'),
  tenantId: z.string().min(1).describe("A tenant ID (ten_…)."),
  keyId: z.string().min(1).describe("An API key's ID (key_…)."),
  planId: z.string().regex(PLAN_ID).describe("A plan ID."),
  poolId: z.string().regex(PLAN_ID).describe("A pool ID."),
  action: z.enum(["activate", "drain", "disable"]).describe("activate: status active; drain: draining; disable: disabled."),
};

/** The headers a chat call may carry to place itself in a program (names: protocol/headers.ts). */
export const ProgramCallHeaders = z.object({
  [Header.program]: z
    .string()
    .regex(PROGRAM_ID)
    .optional()
    .describe("The program the call belongs to. Absent: the call starts a new program, whose ID the answer's header carries."),
  [Header.thread]: z
    .string()
    .regex(THREAD_NAME)
    .default(DEFAULT_THREAD)
    .describe("The program's thread the call runs on: 1–64 letters, digits, or . _ : -"),
  [Header.parentThread]: z
    .string()
    .regex(THREAD_NAME)
    .optional()
    .describe("Forks the thread off this existing thread of the program (its first call only)."),
});

// ---- The views these schemas describe -------------------------------------------

/** True only when A and B are the same type (not merely assignable one way). */
type Exactly<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

// Compile-time only: each line fails `npm run typecheck` when a view and its schema drift apart.
export const VIEWS_MATCH_SCHEMAS: [
  Same<ProgramView, z.output<typeof ProgramObject>>,
  Same<ThreadView, z.output<typeof ThreadObject>>,
  Same<ReturnType<typeof toolsView>, z.output<typeof ToolsObject>>,
  Same<FiguresView, z.output<typeof UsageFigures>>,
  Exactly<keyof ProgramView, keyof z.output<typeof ProgramObject>>,
  Exactly<keyof ThreadView, keyof z.output<typeof ThreadObject>>,
  Exactly<keyof ReturnType<typeof toolsView>, keyof z.output<typeof ToolsObject>>,
  Exactly<keyof FiguresView, keyof z.output<typeof UsageFigures>>,
] = [true, true, true, true, true, true, true, true];
