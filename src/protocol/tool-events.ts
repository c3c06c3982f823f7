import { z } from "zod";
import { DEFAULT_THREAD } from "./headers.js";
import { THREAD_NAME } from "./ids.js";

/*
 * Tool events: a client tells Agentix that a tool of its program started or finished
 * (`POST /v1/programs/{id}/events`), so the pool can predict when the program's next
 * LLM call will come (TAO's readiness, src/core/tao/readiness.ts). The edge validates
 * the client's body with these schemas, normalises it (thread filled in, deadline in
 * epoch ms) and forwards the normalised batch to the pool (`POST /v1/events`, signed
 * like a call), which parses it with the same schemas: the normalised form is valid
 * input, so one schema serves both hops.
 *
 * Events are hints: they never change what a call is billed or where it may run, only
 * how soon the pool expects the program back.
 */

/** Events in one request; a larger batch is refused (400), not truncated. */
export const MAX_TOOL_EVENTS_PER_BATCH = 64;
/** Tool names and tool call IDs are client text: kept short. */
export const MAX_TOOL_NAME_CHARS = 128;
/** Tool arguments are scanned for waits (`sleep 5`); the scan reads at most 64 KiB anyway. */
export const MAX_TOOL_ARGUMENTS_CHARS = 32_768;
/** A day: a longer expected duration is a unit mistake, not a tool. */
export const MAX_EXPECTED_DURATION_MS = 86_400_000;

/** Epoch ms below this are read as a mistake (seconds, or a duration), not as a time in 1970–2001. */
const MIN_EPOCH_MS = 1_000_000_000_000;
/** Year 2286: beyond it a number is not an epoch in ms. */
const MAX_EPOCH_MS = 10_000_000_000_000;

const name = z.string().min(1).max(MAX_TOOL_NAME_CHARS);

const thread = z
  .string()
  .regex(THREAD_NAME, "thread must be 1–64 letters, digits, or . _ : -")
  .default(DEFAULT_THREAD);

const deadlineIso = z.iso
  .datetime({ offset: true, error: "deadline must be an ISO 8601 date-time with a time zone, or epoch milliseconds" })
  .transform((text) => Date.parse(text));
const deadlineMs = z
  .int()
  .min(MIN_EPOCH_MS, "deadline in epoch milliseconds is too small (seconds instead of milliseconds?)")
  .max(MAX_EPOCH_MS, "deadline in epoch milliseconds is too large");

export const ToolStartedEvent = z.strictObject({
  type: z.literal("tool_started"),
  tool: name.optional(),
  /** The `id` of the tool call in the assistant message (OpenAI tool_calls), to match its finish. */
  tool_call_id: name.optional(),
  thread,
  /** How long the client expects the tool to run. */
  expected_duration_ms: z.number().nonnegative().max(MAX_EXPECTED_DURATION_MS).optional(),
  /** The tool will have finished by then: ISO 8601 with a zone, or epoch ms (normalised to epoch ms). */
  deadline: z.union([deadlineIso, deadlineMs]).optional(),
  /** The tool call's arguments: the JSON string of OpenAI's `function.arguments`. */
  arguments: z.string().max(MAX_TOOL_ARGUMENTS_CHARS).optional(),
});
export type ToolStartedEvent = z.output<typeof ToolStartedEvent>;

export const ToolFinishedEvent = z.strictObject({
  type: z.literal("tool_finished"),
  tool: name.optional(),
  tool_call_id: name.optional(),
  thread,
});
export type ToolFinishedEvent = z.output<typeof ToolFinishedEvent>;

export const ToolEvent = z.discriminatedUnion("type", [ToolStartedEvent, ToolFinishedEvent]);
/** Normalised: thread filled in, deadline in epoch ms. */
export type ToolEvent = z.output<typeof ToolEvent>;
export type ToolEventInput = z.input<typeof ToolEvent>;

export const TOOL_EVENT_TYPES = ["tool_started", "tool_finished"] as const;
export type ToolEventType = (typeof TOOL_EVENT_TYPES)[number];

export const ToolEventBatch = z.strictObject({
  events: z.array(ToolEvent).min(1).max(MAX_TOOL_EVENTS_PER_BATCH),
});
export type ToolEventBatch = z.output<typeof ToolEventBatch>;

/**
 * The client's body: one event, or `{events: [...]}`. Chosen by the `events` key, so
 * a failure names the field of the form the client meant (`tool` or `events.2.tool`).
 */
export function parseToolEventsBody(json: unknown): { success: true; data: ToolEventBatch } | { success: false; error: z.ZodError } {
  if (typeof json === "object" && json !== null && !Array.isArray(json) && "events" in json) return ToolEventBatch.safeParse(json);
  const single = ToolEvent.safeParse(json);
  return single.success ? { success: true, data: { events: [single.data] } } : { success: false, error: single.error };
}

/** The pool's answer to a forwarded batch. */
export const ToolEventsAccepted = z.object({ accepted: z.int().nonnegative() });
export type ToolEventsAccepted = z.infer<typeof ToolEventsAccepted>;
