import { z } from "zod";
import { CALL_APIS, CALL_STATUSES, PROGRAM_STATUSES, type Program, USAGE_SOURCES, type UsageRow } from "../db/schema.js";
import type { QuarantineCounts } from "./quarantine-store.js";
import { MAX_LEDGER_SHARDS } from "./shards.js";

/*
 * The UsageLedger RPC contract: what a program hands its tenant's ledger. The ledger
 * parses it itself (a NaN figure must never reach the bill); the shapes follow the D1
 * tables (db/schema.ts), checked below so the two cannot drift apart.
 */

const ms = z.number().finite().nonnegative();
const tokens = z.int().nonnegative();

/** A settled call's row, exactly as the `usage` table takes it. */
export const LedgerUsageRow = z.object({
  callId: z.string().min(1),
  tenantId: z.string().min(1),
  programId: z.string().min(1),
  thread: z.string().min(1),
  model: z.string().min(1),
  engine: z.string(),
  promptTokens: tokens,
  cachedTokens: tokens,
  completionTokens: tokens,
  serviceMs: ms,
  queueMs: ms,
  status: z.enum(CALL_STATUSES),
  startedAt: ms,
  finishedAt: ms,
  pool: z.string(),
  usageSource: z.enum(USAGE_SOURCES),
  api: z.enum(CALL_APIS),
});
export type LedgerUsageRow = z.infer<typeof LedgerUsageRow>;

/** A program's summary row (absolute figures), exactly as the `programs` table takes it. */
export const LedgerProgramSummary = z.object({
  id: z.string().min(1),
  tenantId: z.string().min(1),
  status: z.enum(PROGRAM_STATUSES),
  createdAt: ms,
  endedAt: ms.nullable(),
  calls: z.int().nonnegative(),
  promptTokens: tokens,
  cachedTokens: tokens,
  completionTokens: tokens,
  serviceMs: ms,
  pathMs: ms,
  waitMs: ms,
});
export type LedgerProgramSummary = z.infer<typeof LedgerProgramSummary>;

// Both ways: every wire field is a column, and every column is on the wire.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const usageMatches: Same<LedgerUsageRow, Required<UsageRow>> = true;
const summaryMatches: Same<LedgerProgramSummary, Program> = true;
void usageMatches;
void summaryMatches;

/** Rows per hand-off: a program back from a long ledger outage sends its backlog in several. */
export const HAND_OFF_MAX_ROWS = 500;

const shardCount = z.int().min(1).max(MAX_LEDGER_SHARDS);

export const HandOffInput = z
  .object({
    /** The program's summary when it changed since the ledger last acknowledged one. */
    programs: z.array(LedgerProgramSummary).max(HAND_OFF_MAX_ROWS),
    rows: z.array(LedgerUsageRow).max(HAND_OFF_MAX_ROWS),
    /** Which ledger shard this object is, of how many the program's tenant has (ledger/shards.ts). */
    shard: z.int().nonnegative().default(0),
    shards: shardCount.default(1),
  })
  .refine((input) => input.shard < input.shards, { message: "shard must be below shards", path: ["shard"] });
export type HandOffInput = z.input<typeof HandOffInput>;

/** A ledger shard tells shard 0 the tenant now has this many (shard 0 remembers the most: ledger/shards.ts). */
export const NoteShardsInput = z.object({ shards: shardCount });
export type NoteShardsInput = z.input<typeof NoteShardsInput>;

export type HandOffResult =
  /** Stored in the ledger's own storage (durable): the program may forget them. */
  | { ok: true }
  | { ok: false; error: "invalid_input" | "foreign_tenant"; detail: string };

/**
 * A summary's place in its program's history: every settle adds a call, and the one status
 * change (active to ended or expired) adds none, so (calls, ended) orders a program's
 * summaries. A hand-off that arrives late never replaces a newer one.
 */
export function summaryProgress(summary: Pick<LedgerProgramSummary, "calls" | "status">): number {
  return summary.calls * 2 + (summary.status === "active" ? 0 : 1);
}

/** What one ledger object holds that D1 does not (its `status` RPC): pending, and quarantined (ledger/quarantine-store.ts). */
export interface LedgerStatus {
  /** Shard 0: the most ledger shards the tenant ever used (ledger/shards.ts); another shard: the most it saw. */
  shards: number;
  pending: { rows: number; summaries: number; /** When the oldest pending item began waiting (its call's settle); null: none. */ oldestAt: number | null };
  quarantined: QuarantineCounts;
}
