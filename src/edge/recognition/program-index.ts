import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { ConversationIndex } from "../../core/recognition/conversation-index.js";
import { edgeConfig, type Env } from "../env.js";
import { SqlEntries } from "./sql-entries.js";

/*
 * One object per tenant (`idFromName(tenantId)`) holding its conversation index
 * (core/recognition/conversation-index.ts): which program a call without a program
 * header continues. Per tenant, so it grows with tenants, and a tenant's calls are
 * never matched against another's. Entries live in the object's SQLite, at most
 * MAX_INDEX_ENTRIES, forgotten after the program idle TTL (PROGRAM_IDLE_TTL_MS).
 */

export const MAX_INDEX_ENTRIES = 20_000;

const Messages = z.array(z.string()).min(1).max(4_096);

export const RecognizeCallInput = z.object({
  model: z.string().min(1),
  /** The call's messages, canonical; empty: not a conversation (only a session key can link it). */
  messages: z.array(z.string()).max(4_096),
  /** An identifier the client sends per session ("<where>:<value>", e.g. a Messages metadata.user_id). */
  sessionKey: z.string().min(1).max(600).optional(),
  /** A program that refused the call (it ended): forgotten before recognising again. */
  exclude: z.string().min(1).optional(),
  /** The program the call starts when nothing links it to one. */
  newProgramId: z.string().min(1),
  now: z.number(),
});
export type RecognizeCallInput = z.infer<typeof RecognizeCallInput>;

export interface RecognizedCall {
  programId: string;
  thread: string;
  /** Set for a fork: the thread it branches off. */
  parentThread?: string;
  how: "session_key" | "continuation" | "fork" | "retry" | "new";
}

export const RecordOutcomeInput = z.object({
  model: z.string().min(1),
  messages: Messages,
  programId: z.string().min(1),
  thread: z.string().min(1),
  /** The canonical assistant reply the client will replay; absent: the call failed. */
  reply: z.string().optional(),
  now: z.number(),
});
export type RecordOutcomeInput = z.infer<typeof RecordOutcomeInput>;

export class ProgramIndex extends DurableObject<Env> {
  readonly #index: ConversationIndex;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#index = new ConversationIndex(
      { maxEntries: MAX_INDEX_ENTRIES, ttlMs: edgeConfig(env).programIdleTtlMs },
      new SqlEntries(ctx.storage.sql),
    );
  }

  /**
   * The program and thread a call joins: its session key's program, else the one its
   * conversation continues, else the new one; recorded as sent in the same step (no
   * other call can slip between), and the session key bound to it.
   */
  async recognizeCall(raw: RecognizeCallInput): Promise<RecognizedCall> {
    const input = RecognizeCallInput.parse(raw);
    return this.ctx.storage.transactionSync(() => {
      if (input.exclude !== undefined) this.#forget(input.exclude);
      const keyed = input.sessionKey === undefined ? undefined : this.#sessionProgram(input.sessionKey, input.now);
      const found = keyed === undefined && input.messages.length > 0 ? this.#index.recognize(input.model, input.messages, input.now) : undefined;
      const call: RecognizedCall =
        keyed !== undefined
          ? { ...keyed, how: "session_key" }
          : found === undefined
            ? { programId: input.newProgramId, thread: "main", how: "new" }
            : { programId: found.programId, thread: found.thread, how: found.how, ...(found.how === "fork" ? { parentThread: found.parent } : {}) };
      if (input.messages.length > 0) this.#index.recordCall(input.model, input.messages, call.programId, call.thread, input.now);
      if (input.sessionKey !== undefined) this.#bindSession(input.sessionKey, call.programId, input.now);
      return call;
    });
  }

  #sessionProgram(key: string, now: number): { programId: string; thread: string } | undefined {
    const row = this.ctx.storage.sql
      .exec<{ program_id: string; thread: string; used_at: number }>("SELECT program_id, thread, used_at FROM session_keys WHERE key = ?", key)
      .toArray()[0];
    if (row === undefined || now - row.used_at > edgeConfig(this.env).programIdleTtlMs) return undefined;
    return { programId: row.program_id, thread: row.thread };
  }

  #bindSession(key: string, programId: string, now: number): void {
    const sql = this.ctx.storage.sql;
    const bound = sql.exec<{ program_id: string }>("SELECT program_id FROM session_keys WHERE key = ?", key).toArray()[0];
    if (bound?.program_id === programId) sql.exec("UPDATE session_keys SET used_at = ? WHERE key = ?", now, key);
    else sql.exec("INSERT OR REPLACE INTO session_keys (key, program_id, thread, used_at) VALUES (?, ?, 'main', ?)", key, programId, now);
    sql.exec("DELETE FROM session_keys WHERE key IN (SELECT key FROM session_keys ORDER BY used_at DESC LIMIT -1 OFFSET ?)", MAX_INDEX_ENTRIES);
  }

  #forget(programId: string): void {
    this.#index.forgetProgram(programId);
    this.ctx.storage.sql.exec("DELETE FROM session_keys WHERE program_id = ?", programId);
  }

  /** A call's end: its reply, for calls that continue it, or its failure, for a retry. */
  async recordOutcome(raw: RecordOutcomeInput): Promise<void> {
    const input = RecordOutcomeInput.parse(raw);
    this.ctx.storage.transactionSync(() => {
      if (input.reply === undefined) this.#index.recordFailure(input.model, input.messages, input.programId, input.thread, input.now);
      else this.#index.recordReply(input.model, input.messages, input.reply, input.programId, input.thread, input.now);
    });
  }
}
