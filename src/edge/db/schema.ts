import { sql } from "drizzle-orm";
import { index, integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/*
 * The edge's D1 tables: the one source of truth for their shape (migrations in
 * migrations/ are generated from this file by `npm run db:generate`). Every time
 * is an integer of milliseconds since the epoch, as Date.now() gives it, so the
 * Worker, the Durable Objects and SQL compare them without conversion.
 */

/** The plan every tenant starts on (seeded by migration 0002). */
export const DEFAULT_PLAN_ID = "free";

/**
 * What a tenant pays for: its limits and its scheduling weight. Plans are
 * created and updated, never deleted (tenants reference them by id).
 */
export const plans = sqliteTable("plans", {
  /** A short slug, e.g. "free", "pro". */
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /** Requests per minute. */
  rpm: integer("rpm").notNull(),
  /** Tokens (prompt + completion) per minute. */
  tpm: integer("tpm").notNull(),
  /** Calls in flight at once. */
  maxConcurrent: integer("max_concurrent").notNull(),
  /** Programs active at once (checked when a program is created). */
  maxActivePrograms: integer("max_active_programs").notNull(),
  /** Tokens (prompt + completion) per calendar month (UTC); null: no budget. */
  monthlyTokenBudget: integer("monthly_token_budget"),
  /**
   * The completion limit of a call that sets neither max_tokens nor
   * max_completion_tokens: reserved at admission and sent to the engine (never above
   * max_output_tokens).
   */
  defaultMaxTokens: integer("default_max_tokens").notNull(),
  /**
   * The largest max_tokens / max_completion_tokens a call may ask for (more: 400);
   * null: no cap of the plan's own (tpm and the budget still bound a call). Added by
   * migration 0003.
   */
  maxOutputTokens: integer("max_output_tokens"),
  /**
   * Engine extensions the plan's tenants may send (JSON array of names): top-level
   * request fields beyond OpenAI's (e.g. "min_tokens") or "messages.<key>" for a
   * message field. Anything else outside the OpenAI subset is refused. Added by 0003.
   */
  allowedExtensions: text("allowed_extensions", { mode: "json" })
    .$type<string[]>()
    .notNull()
    .default(sql`'[]'`),
  /** Tool events per minute across all of a tenant's programs. Added by 0003. */
  toolEventsPerMinute: integer("tool_events_per_minute").notNull().default(6000),
  /** Scheduling weight for fair sharing in the pool (x-agentix-weight). */
  weight: real("weight").notNull().default(1),
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
  /**
   * Models the plan's tenants may call (JSON array of names); null: any model some
   * pool serves. Added by migration 0004.
   */
  allowedModels: text("allowed_models", { mode: "json" }).$type<string[]>(),
  /**
   * Regions whose pools may serve the plan's tenants (data residency; JSON array of
   * region slugs); null: any region. Added by 0004.
   */
  allowedRegions: text("allowed_regions", { mode: "json" }).$type<string[]>(),
  /**
   * TenantLimiter objects a tenant's admissions are split between (1..64; 1: one object,
   * as before): its rpm, tpm and concurrency are split, its budget granted to them in
   * chunks (limiter/shards.ts). Added by migration 0008.
   */
  limiterShards: integer("limiter_shards").notNull().default(1),
});

/**
 * What a pool does with calls: `active` takes new programs; `draining` serves the
 * programs it already has and takes no new ones; `disabled` takes nothing.
 */
export const POOL_STATUSES = ["active", "draining", "disabled"] as const;
export type PoolStatus = (typeof POOL_STATUSES)[number];

/**
 * The pool directory: every pool the edge may route to. Added by migration 0004.
 * The HMAC secret the edge signs a pool's requests with is a Worker secret, never
 * stored here; a row names its key by ID only.
 */
export const pools = sqliteTable("pools", {
  /** A short slug, e.g. "use1-a". */
  id: text("id").primaryKey(),
  /** Where the pool runs, a slug such as "us-east" or "eu-west" (plans may restrict regions). */
  region: text("region").notNull(),
  /** The pool's base URL, http(s), no trailing slash (it may carry a reverse proxy's path prefix). */
  url: text("url").notNull(),
  /** Model names the pool serves (JSON array, at least one). */
  models: text("models", { mode: "json" }).$type<string[]>().notNull(),
  /** Share of new programs relative to other eligible pools (> 0). */
  weight: real("weight").notNull().default(1),
  status: text("status", { enum: POOL_STATUSES }).notNull().default("active"),
  /** ID of the HMAC key the edge signs this pool's requests with (x-agentix-key-id). */
  signingKeyId: text("signing_key_id").notNull(),
  createdAt: integer("created_at").notNull(),
  updatedAt: integer("updated_at").notNull(),
});

export const tenants = sqliteTable("tenants", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /**
   * Per-tenant multiplier on its plan's weight (default 1): the weight sent as
   * x-agentix-weight is plan.weight × this.
   */
  weight: real("weight").notNull().default(1),
  createdAt: integer("created_at").notNull(),
  /*
   * Added by migration 0001 (ALTER TABLE ADD COLUMN only: D1 cannot safely
   * rebuild a parent table). No REFERENCES on plan_id: SQLite refuses to add a
   * foreign-key column with a non-NULL default; the admin API checks the plan
   * exists, and plans are never deleted.
   */
  planId: text("plan_id").notNull().default(DEFAULT_PLAN_ID),
  /** Per-tenant overrides of the plan's limits; null: the plan's value. */
  rpmOverride: integer("rpm_override"),
  tpmOverride: integer("tpm_override"),
  maxConcurrentOverride: integer("max_concurrent_override"),
  maxActiveProgramsOverride: integer("max_active_programs_override"),
  monthlyTokenBudgetOverride: integer("monthly_token_budget_override"),
  defaultMaxTokensOverride: integer("default_max_tokens_override"),
  /* Added by migration 0003. A JSON array replaces the plan's extensions; null: the plan's. */
  maxOutputTokensOverride: integer("max_output_tokens_override"),
  allowedExtensionsOverride: text("allowed_extensions_override", { mode: "json" }).$type<string[]>(),
  toolEventsPerMinuteOverride: integer("tool_events_per_minute_override"),
  /** The plan's limiter_shards for this tenant; null: the plan's. */
  limiterShardsOverride: integer("limiter_shards_override"),
  /**
   * Whether a call without x-agentix-program may join a program by its conversation
   * (recognition/program-index.ts); off: it starts a new one. Added by migration 0006.
   */
  programInference: integer("program_inference", { mode: "boolean" }).notNull().default(true),
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

/** The API a call came in by (the route the client called); the pool serves each in its own shape. */
export const CALL_APIS = ["chat.completions", "completions", "responses", "messages"] as const;
export type CallApi = (typeof CALL_APIS)[number];

/** How a call ended: "timeout" is the edge's own deadline (CALL_TIMEOUT_MS), "cancelled" the client leaving. */
export const CALL_STATUSES = ["ok", "error", "cancelled", "timeout"] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

/**
 * Where a ledger row's token counts come from: the engine's whole report; the
 * engine's per-chunk report up to the last chunk relayed (a stream cut short);
 * the edge's estimate (prompt estimate + output chunks, no engine figure); none
 * (nothing reached an engine); lost (the call's edge vanished and the program
 * reaped the call: the figures are unknown).
 */
export const USAGE_SOURCES = ["engine", "engine_partial", "estimate", "none", "lost"] as const;
export type UsageSource = (typeof USAGE_SOURCES)[number];

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
    /** Settle time: the call is billed in the day and period this falls in (UTC). */
    finishedAt: integer("finished_at").notNull(),
    /** The directory ID of the pool that took the call ("" when none did); added by migration 0001. */
    pool: text("pool").notNull().default(""),
    /** Where the token counts come from (USAGE_SOURCES); rows from before the column say "engine". */
    usageSource: text("usage_source", { enum: USAGE_SOURCES }).notNull().default("engine"),
    /** The API the call came in by (CALL_APIS); rows from before the column say "chat.completions". Added by migration 0005. */
    api: text("api", { enum: CALL_APIS }).notNull().default("chat.completions"),
  },
  (t) => [
    index("usage_tenant_finished_idx").on(t.tenantId, t.finishedAt),
    index("usage_program_idx").on(t.programId),
    // The admin export reads one period across all tenants.
    index("usage_finished_idx").on(t.finishedAt),
  ],
);

export type Plan = typeof plans.$inferSelect;
export type Pool = typeof pools.$inferSelect;
export type Tenant = typeof tenants.$inferSelect;
export type ApiKey = typeof apiKeys.$inferSelect;
export type Program = typeof programs.$inferSelect;
export type UsageRow = typeof usage.$inferInsert;
