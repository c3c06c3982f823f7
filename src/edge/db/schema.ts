import { index, integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/*
 * The edge's D1 tables: the one source of truth for their shape (migrations in
 * migrations/ are generated from this file by `npm run db:generate`). Every time
 * is an integer of milliseconds since the epoch, as Date.now() gives it, so the
 * Worker, the Durable Objects and SQL compare them without conversion.
 */

export const tenants = sqliteTable("tenants", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /** Plan weight for fair sharing in the pool (sent as x-agentix-weight). */
  weight: real("weight").notNull().default(1),
  createdAt: integer("created_at").notNull(),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id")
      .notNull()
      .references(() => tenants.id),
    /** SHA-256 hex of the whole key; the key itself is never stored. */
    keyHash: text("key_hash").notNull().unique(),
    /** The key's first characters, to tell keys apart in listings. */
    prefix: text("prefix").notNull(),
    name: text("name"),
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
    lastUsedAt: integer("last_used_at"),
  },
  (t) => [index("api_keys_tenant_idx").on(t.tenantId)],
);

export const PROGRAM_STATUSES = ["active", "ended", "expired"] as const;
export type ProgramStatus = (typeof PROGRAM_STATUSES)[number];

/** One row per program: created when it starts, its summary written when it ends or expires. */
export const programs = sqliteTable(
  "programs",
  {
    id: text("id").primaryKey(),
    tenantId: text("tenant_id")
      .notNull()
      .references(() => tenants.id),
    status: text("status", { enum: PROGRAM_STATUSES }).notNull(),
    createdAt: integer("created_at").notNull(),
    endedAt: integer("ended_at"),
    calls: integer("calls").notNull().default(0),
    promptTokens: integer("prompt_tokens").notNull().default(0),
    cachedTokens: integer("cached_tokens").notNull().default(0),
    completionTokens: integer("completion_tokens").notNull().default(0),
    /** PLAS value: total service of its calls (ms). */
    serviceMs: real("service_ms").notNull().default(0),
    /** ATLAS value: its critical-path service (ms). */
    pathMs: real("path_ms").notNull().default(0),
    /** Accumulated queueing time of its calls (ms). */
    waitMs: real("wait_ms").notNull().default(0),
  },
  (t) => [index("programs_tenant_created_idx").on(t.tenantId, t.createdAt)],
);

export const CALL_STATUSES = ["ok", "error", "cancelled"] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

/** The usage ledger: one row per call, keyed by the call ID so settling twice cannot bill twice. */
export const usage = sqliteTable(
  "usage",
  {
    callId: text("call_id").primaryKey(),
    tenantId: text("tenant_id")
      .notNull()
      .references(() => tenants.id),
    programId: text("program_id")
      .notNull()
      .references(() => programs.id),
    thread: text("thread").notNull(),
    model: text("model").notNull(),
    /** Engine that served the call; empty when none did. */
    engine: text("engine").notNull().default(""),
    promptTokens: integer("prompt_tokens").notNull().default(0),
    cachedTokens: integer("cached_tokens").notNull().default(0),
    completionTokens: integer("completion_tokens").notNull().default(0),
    serviceMs: real("service_ms").notNull().default(0),
    queueMs: real("queue_ms").notNull().default(0),
    status: text("status", { enum: CALL_STATUSES }).notNull(),
    startedAt: integer("started_at").notNull(),
    finishedAt: integer("finished_at").notNull(),
  },
  (t) => [
    index("usage_tenant_finished_idx").on(t.tenantId, t.finishedAt),
    index("usage_program_idx").on(t.programId),
  ],
);

export type Tenant = typeof tenants.$inferSelect;
export type ApiKey = typeof apiKeys.$inferSelect;
export type Program = typeof programs.$inferSelect;
export type UsageRow = typeof usage.$inferInsert;
