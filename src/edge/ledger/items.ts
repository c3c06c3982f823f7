import type { Database } from "../db/client.js";
import { D1_BATCH_MAX, type LedgerWrite, recordUsageRows, writeProgramSummaries } from "../db/ledger.js";
import type { PendingSummary } from "./pending-store.js";
import type { LedgerUsageRow } from "./types.js";

/** What a ledger sends D1: a program's summary (with its place in the program's history), or a call's usage row. */
export type LedgerItem = ({ kind: "program" } & PendingSummary) | { kind: "usage"; row: LedgerUsageRow };
export type ProgramItem = Extract<LedgerItem, { kind: "program" }>;
export type UsageItem = Extract<LedgerItem, { kind: "usage" }>;

export const isProgramItem = (item: LedgerItem): item is ProgramItem => item.kind === "program";
export const isUsageItem = (item: LedgerItem): item is UsageItem => item.kind === "usage";

/** The item's key in its table: the call ID of a row, the program ID of a summary. */
export const itemKey = (item: LedgerItem): string => (item.kind === "usage" ? item.row.callId : item.summary.id);

/**
 * The items' D1 statements in multi-row writes, summaries first (a usage row references its
 * program's row; a batch runs in order), with the items each carries.
 */
export function statementsOf(db: Database, items: readonly LedgerItem[]): { write: LedgerWrite; items: LedgerItem[] }[] {
  return [
    ...writeProgramSummaries(db, items.filter(isProgramItem), (item) => item.summary),
    ...recordUsageRows(db, items.filter(isUsageItem), (item) => item.row),
  ];
}

/** The items in D1 batches of at most D1_BATCH_MAX statements, in statement order. */
export function batchesOf(db: Database, items: readonly LedgerItem[]): LedgerItem[][] {
  const statements = statementsOf(db, items);
  const batches: LedgerItem[][] = [];
  for (let i = 0; i < statements.length; i += D1_BATCH_MAX) {
    batches.push(statements.slice(i, i + D1_BATCH_MAX).flatMap((statement) => statement.items));
  }
  return batches;
}
