import { z } from "zod";
import { MAX_CONTEXT_MESSAGES } from "../../core/recognition/context-generation.js";
import { THREAD_NAME } from "../../protocol/ids.js";
import { THREAD_END_OUTCOMES, type ThreadEndOutcome } from "../../protocol/threads.js";
import { ToolEventBatch } from "../../protocol/tool-events.js";
import { CALL_APIS, CALL_STATUSES, PROGRAM_STATUSES, USAGE_SOURCES } from "../db/schema.js";
import { MAX_LEDGER_SHARDS } from "../ledger/shards.js";
import type { ToolsState } from "./tool-store.js";

/*
 * The ProgramSession RPC contract. Inputs are zod schemas because the object
 * parses them itself: a NaN or negative figure must never reach the accounting.
 * Times are ms since the epoch, passed in by the caller (the Worker's clock).
 */

const ms = z.number().finite().nonnegative();
const tokens = z.int().nonnegative();

export const CreateProgramInput = z.object({
  tenantId: z.string().min(1),
  programId: z.string().min(1),
  now: ms,
});
export type CreateProgramInput = z.infer<typeof CreateProgramInput>;

export const BeginCallInput = z.object({
  /**
   * Set when this call starts the program (no x-agentix-program header): the
   * program is created in the same transaction as the call, so a new program
   * costs one round trip, and a refused call leaves no program behind.
   */
  newProgram: CreateProgramInput.omit({ now: true }).optional(),
  callId: z.string().min(1),
  thread: z.string().min(1),
  /** Set when the call forks `thread` off an existing thread. */
  parentThread: z.string().min(1).optional(),
  model: z.string().min(1),
  /** The pool the call is sent to, for the usage ledger. */
  pool: z.string().default(""),
  /** The API the call came in by, for the usage ledger. */
  api: z.enum(CALL_APIS).default("chat.completions"),
  /**
   * The tenant's ledger shards now (ledger/shards.ts: its limiter shard count); the program
   * hands its usage to shard hash(program ID) mod this from then on. Absent: unchanged.
   */
  ledgerShards: z.int().min(1).max(MAX_LEDGER_SHARDS).optional(),
  /**
   * The prefix hashes of the call's conversation (core/recognition/conversation-index.ts
   * prefixHashes), from which the thread's context generation follows; empty: the call
   * has no conversation, and the generation stays.
   */
  contextHashes: z.array(z.string().min(1).max(64)).max(MAX_CONTEXT_MESSAGES).default([]),
  now: ms,
});
export type BeginCallInput = z.input<typeof BeginCallInput>;

export const SettleCallInput = z.object({
  callId: z.string().min(1),
  status: z.enum(CALL_STATUSES),
  promptTokens: tokens,
  cachedTokens: tokens,
  completionTokens: tokens,
  /** Where the token counts come from (the engine, or an estimate). */
  usageSource: z.enum(USAGE_SOURCES),
  serviceMs: ms,
  queueMs: ms,
  /** Engine that served the call; empty when none did. */
  engine: z.string(),
  /**
   * The pool that answered, when another than the one named at begin took the call
   * (failover); absent: the begin's. With an engine, it becomes the program's pool.
   */
  pool: z.string().optional(),
  finishedAt: ms,
});
export type SettleCallInput = z.infer<typeof SettleCallInput>;

export type ProgramStatus = (typeof PROGRAM_STATUSES)[number];

/** Why a program cannot take a call. */
export type ProgramRefusal = "not_found" | "ended" | "expired";

export type BeginCallResult =
  | {
      ok: true;
      /** PLAS value: the program's attained service (ms). */
      serviceMs: number;
      /** ATLAS value: the program's critical-path service (ms). */
      pathMs: number;
      /** Accumulated queueing time of the program's calls (ms). */
      waitMs: number;
      /** Engine that served the program last; empty when none has. */
      engine: string;
      /** The pool whose engine served the program last (its cache is there); empty when none has. */
      pool: string;
      /** The `h` this call recorded (ATLAS start value). */
      startValueMs: number;
      /** The call's thread's context generation (core/recognition/context-generation.ts). */
      contextGeneration: number;
      /**
       * Forks of the call's thread whose work this call takes in (core/recognition/branch-merge.ts),
       * each with its context as the call saw it: once the call completes, the edge ends them
       * as merged (endThread with `ifUnchanged`) and tells their pools.
       */
      mergedBranches: MergedBranch[];
    }
  | { ok: false; error: ProgramRefusal | "unknown_parent" | "parent_mismatch" | "duplicate_call" }
  /** A caller bug (the input failed its schema): nothing was changed. */
  | { ok: false; error: "invalid_input"; detail: string };

/**
 * A begun call its tenant's limiter refused (beginCall ran in parallel with the
 * admission): the call is taken back, and a program its begin created goes with it.
 */
export const AbandonCallInput = z.object({
  callId: z.string().min(1),
  /** The begin carried newProgram: the program goes too if it holds nothing else. */
  createdByCall: z.boolean(),
});
export type AbandonCallInput = z.infer<typeof AbandonCallInput>;

export type AbandonCallResult =
  | { abandoned: true; programDropped: boolean }
  | { abandoned: false; reason: "not_found" | "unknown_call" | "not_in_flight" | "invalid_input" };

export type SettleCallResult =
  | { settled: true }
  | { settled: false; reason: "not_found" | "unknown_call" | "already_settled" }
  /** A caller bug (NaN or negative figures, …): nothing was changed. */
  | { settled: false; reason: "invalid_input"; detail: string };

export interface ThreadState {
  name: string;
  parent: string | null;
  inFlight: number;
  calls: number;
  serviceMs: number;
  /** One more each time a call stopped extending the thread's previous one (core/recognition/context-generation.ts). */
  contextGeneration: number;
  /** When the agent ended the thread; null while it is open (a call reopens it). */
  endedAt: number | null;
  /** How the agent said it ended; null while it is open. */
  endOutcome: ThreadEndOutcome | null;
}

export interface ProgramState {
  id: string;
  tenantId: string;
  status: ProgramStatus;
  createdAt: number;
  endedAt: number | null;
  lastActivityAt: number;
  /** PLAS value (ms). */
  serviceMs: number;
  /** ATLAS value (ms). */
  pathMs: number;
  waitMs: number;
  /** Engine affinity: the engine that served the program last; empty when none has. */
  engine: string;
  /** The pool of that engine; empty when none has. */
  pool: string;
  inFlight: number;
  totals: {
    calls: number;
    promptTokens: number;
    cachedTokens: number;
    completionTokens: number;
  };
  /** Empty once the program has ended or expired (its threads are cleaned up). */
  threads: ThreadState[];
  /** What the client said about its tools (POST /v1/programs/{id}/events). */
  tools: ToolsState;
}

export type EndProgramResult =
  /** `servedBy`: the pools that served the program, when this request ended it (empty when it had ended before). */
  | { ok: true; state: ProgramState; servedBy: string[] }
  | { ok: false; error: "not_found" };

export const EndProgramInput = z.object({ now: ms });

/** A fork a call merged, with the context it had then. */
export const MergedBranch = z.object({
  thread: z.string().regex(THREAD_NAME),
  messages: z.int().nonnegative(),
  hash: z.string(),
});
export type MergedBranch = z.infer<typeof MergedBranch>;

export const EndThreadInput = z.object({
  thread: z.string().regex(THREAD_NAME),
  outcome: z.enum(THREAD_END_OUTCOMES),
  /**
   * End it only if its context is still this one and no call of it is in flight (the
   * edge's merge guess: a fork that moved on since was not merged); else thread_changed.
   */
  ifUnchanged: MergedBranch.pick({ messages: true, hash: true }).optional(),
  now: ms,
});
export type EndThreadInput = z.infer<typeof EndThreadInput>;

export type EndThreadResult =
  /**
   * `servedBy`: the pools whose engines hold the thread's context, when this request
   * ended it (empty when it had ended before: the hint went then); `generation`: the
   * thread's context generation, whose context those pools may drop.
   */
  | { ok: true; tenantId: string; thread: ThreadState; servedBy: string[]; generation: number }
  | { ok: false; error: ProgramRefusal | "unknown_thread" | "thread_changed" | "invalid_input" };
export type EndProgramInput = z.infer<typeof EndProgramInput>;

export const RecordToolEventsInput = z.object({
  /** Already validated and normalised by the Worker (protocol/tool-events.ts); parsed again here. */
  events: ToolEventBatch.shape.events,
  now: ms,
});
export type RecordToolEventsInput = z.input<typeof RecordToolEventsInput>;

export type RecordToolEventsResult =
  /** `pool`: the program's pool (where its events go); empty while no engine has served it. */
  | { ok: true; accepted: number; tools: ToolsState; pool: string }
  | { ok: false; error: ProgramRefusal }
  /** The program's event bucket is empty: nothing was recorded. */
  | { ok: false; error: "rate_limited"; retryAfterMs: number; limitPerMinute: number }
  | { ok: false; error: "invalid_input"; detail: string };

/** A Responses API response the program keeps for a later previous_response_id (program/response-store.ts). */
export const RecordResponseInput = z.object({
  responseId: z.string().min(1).max(200),
  /** The response it continued (its previous_response_id), if any. */
  parentId: z.string().min(1).max(200).nullable(),
  /** Its input items, then its output as input items. */
  items: z.array(z.unknown()),
  now: ms,
});
export type RecordResponseInput = z.infer<typeof RecordResponseInput>;

export type RecordResponseResult = { recorded: true } | { recorded: false; reason: "not_found" | "too_large" | "invalid_input" };

/** `itemsJson`: the conversation's items as a JSON array (text crosses the RPC boundary as is). */
export type ResponseConversationResult = { ok: true; itemsJson: string } | { ok: false; error: "not_found" };
