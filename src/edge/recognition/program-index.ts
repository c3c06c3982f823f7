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
  messages: Messages,
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
  how: "continuation" | "fork" | "retry" | "new";
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

  /** The program and thread a call joins, recorded as sent in the same step (no other call can slip between). */
  async recognizeCall(raw: RecognizeCallInput): Promise<RecognizedCall> {
    const input = RecognizeCallInput.parse(raw);
    const found = this.#index.recognize(input.model, input.messages, input.now);
    const call: RecognizedCall =
      found === undefined
        ? { programId: input.newProgramId, thread: "main", how: "new" }
        : { programId: found.programId, thread: found.thread, how: found.how, ...(found.how === "fork" ? { parentThread: found.parent } : {}) };
    this.ctx.storage.transactionSync(() => this.#index.recordCall(input.model, input.messages, call.programId, call.thread, input.now));
    return call;
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
