import { z } from "zod";
import { MESSAGE_EXTENSION_PREFIX, MESSAGE_FIELDS, REQUEST_FIELDS } from "../../../protocol/chat.js";
import { SigningKeyId } from "../../../protocol/signing.js";
import { MAX_TOOL_EVENTS_PER_BATCH } from "../../../protocol/tool-events.js";
import { POOL_STATUSES } from "../../db/schema.js";
import { DEFAULT_TOOL_EVENTS_PER_MINUTE, MAX_LIMITER_SHARDS } from "../../limits/plan-limits.js";

/** Admin bodies are tiny; this caps them independently of MAX_BODY_BYTES. */
export const ADMIN_BODY_BYTES = 16 * 1024;

/** Plan, pool and region IDs. */
export const PLAN_ID = /^[a-z0-9][a-z0-9_-]{0,31}$/;

const slug = z.string().regex(PLAN_ID, "must be 1–32 lowercase letters, digits, _ or -, starting with a letter or digit");
const planId = slug;
const name = z.string().trim().min(1).max(200);
// Bounded so String(weight) never takes exponent form in the signed x-agentix-weight header.
const weight = z.number().finite().min(0.001).max(1_000);
const count = (max: number) => z.int().positive().max(max);
const tokens = z.int().nonnegative().max(1e15);

/** The pool sets these itself (it drops a client's `priority`); allowing them would mean nothing. */
const POOL_OWNED_FIELDS = new Set(["priority"]);
const EXTENSION_NAME = /^(messages\.)?[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/**
 * Engine extensions a plan (or tenant) allows beyond OpenAI's fields: request field
 * names (e.g. "min_tokens", "ignore_eos") or "messages.<key>" for a message field.
 */
const extensionName = z
  .string()
  .regex(EXTENSION_NAME, 'must be a field name (letters, digits, _), or "messages." and one')
  .refine((name) => {
    const message = name.startsWith(MESSAGE_EXTENSION_PREFIX);
    const field = message ? name.slice(MESSAGE_EXTENSION_PREFIX.length) : name;
    return !(message ? MESSAGE_FIELDS : REQUEST_FIELDS).has(field) && !POOL_OWNED_FIELDS.has(field);
  }, "is already an OpenAI field (always allowed) or one the pool sets itself");
const extensions = z
  .array(extensionName)
  .max(64)
  .transform((names) => [...new Set(names)].sort());

/** Regions are slugs such as "us-east" or "eu-west". */
const region = slug;
/** Model names as engines serve them, e.g. "meta-llama/Llama-3.1-8B-Instruct" or "llama3:8b"; no commas or spaces. */
const MODEL_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,255}$/;
const modelName = z.string().regex(MODEL_NAME, "must be 1–256 of letters, digits, . _ : / @ + -, starting with a letter or digit");
/** A set of names, kept sorted; at least one (null, not [], means no restriction). */
const nameSet = <T extends z.ZodType<string>>(item: T, max: number) =>
  z
    .array(item)
    .min(1, "must name at least one (null: no restriction)")
    .max(max)
    .transform((names) => [...new Set(names)].sort());

/** Models and regions a plan allows; null: no restriction. */
const RESTRICTIONS = {
  allowed_models: nameSet(modelName, 256).nullable(),
  allowed_regions: nameSet(region, 64).nullable(),
};

const LIMITS = {
  rpm: count(1e7),
  tpm: count(1e12),
  max_concurrent: count(1e6),
  max_active_programs: count(1e9),
  monthly_token_budget: tokens.nullable(),
  default_max_tokens: count(1e7),
  /** null: no cap of the plan's own. */
  max_output_tokens: count(1e7).nullable(),
  allowed_extensions: extensions,
  /** At least one whole batch, so a batch can always be taken once the bucket is full. */
  tool_events_per_minute: z.int().min(MAX_TOOL_EVENTS_PER_BATCH).max(1e9),
  /** TenantLimiter objects the tenant's admissions are split between (limiter/shards.ts). */
  limiter_shards: count(MAX_LIMITER_SHARDS),
};

export const CreatePlanBody = z.strictObject({
  id: planId,
  name,
  rpm: LIMITS.rpm,
  tpm: LIMITS.tpm,
  max_concurrent: LIMITS.max_concurrent,
  max_active_programs: LIMITS.max_active_programs,
  monthly_token_budget: LIMITS.monthly_token_budget,
  default_max_tokens: LIMITS.default_max_tokens,
  // Added after the others: optional so existing callers keep working.
  max_output_tokens: LIMITS.max_output_tokens.default(null),
  allowed_extensions: LIMITS.allowed_extensions.default([]),
  tool_events_per_minute: LIMITS.tool_events_per_minute.default(DEFAULT_TOOL_EVENTS_PER_MINUTE),
  limiter_shards: LIMITS.limiter_shards.default(1),
  weight: weight.default(1),
  allowed_models: RESTRICTIONS.allowed_models.default(null),
  allowed_regions: RESTRICTIONS.allowed_regions.default(null),
});

export const UpdatePlanBody = z
  .strictObject({
    name: name.optional(),
    rpm: LIMITS.rpm.optional(),
    tpm: LIMITS.tpm.optional(),
    max_concurrent: LIMITS.max_concurrent.optional(),
    max_active_programs: LIMITS.max_active_programs.optional(),
    monthly_token_budget: LIMITS.monthly_token_budget.optional(),
    default_max_tokens: LIMITS.default_max_tokens.optional(),
    max_output_tokens: LIMITS.max_output_tokens.optional(),
    allowed_extensions: LIMITS.allowed_extensions.optional(),
    tool_events_per_minute: LIMITS.tool_events_per_minute.optional(),
    limiter_shards: LIMITS.limiter_shards.optional(),
    weight: weight.optional(),
    allowed_models: RESTRICTIONS.allowed_models.optional(),
    allowed_regions: RESTRICTIONS.allowed_regions.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one field to change");

export const CreateTenantBody = z.strictObject({
  name,
  weight: weight.optional(),
  plan: planId.optional(),
});

export const UpdateTenantBody = z
  .strictObject({
    name: name.optional(),
    weight: weight.optional(),
    plan: planId.optional(),
    /** false: calls without x-agentix-program never join a program by their conversation. */
    program_inference: z.boolean().optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one field to change");

/** Each field: a number overrides the plan, null goes back to the plan's value, absent leaves it as is. */
export const TenantOverridesBody = z
  .strictObject({
    rpm: LIMITS.rpm.nullable().optional(),
    tpm: LIMITS.tpm.nullable().optional(),
    max_concurrent: LIMITS.max_concurrent.nullable().optional(),
    max_active_programs: LIMITS.max_active_programs.nullable().optional(),
    monthly_token_budget: tokens.nullable().optional(),
    default_max_tokens: LIMITS.default_max_tokens.nullable().optional(),
    max_output_tokens: LIMITS.max_output_tokens.optional(),
    /** A list replaces the plan's (an empty list allows none); null: the plan's. */
    allowed_extensions: LIMITS.allowed_extensions.nullable().optional(),
    tool_events_per_minute: LIMITS.tool_events_per_minute.nullable().optional(),
    limiter_shards: LIMITS.limiter_shards.nullable().optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one override (a number, or null to clear)");

export const CreateKeyBody = z.strictObject({
  name: name.optional(),
});

/** A pool's base URL: http(s), no credentials, query, fragment or trailing slash (the API paths are appended). */
const poolUrl = z
  .string()
  .max(2048)
  .refine((raw) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      return false;
    }
    return (
      (url.protocol === "http:" || url.protocol === "https:") &&
      url.username === "" &&
      url.password === "" &&
      !raw.includes("?") &&
      !raw.includes("#") &&
      !raw.endsWith("/")
    );
  }, "must be an http(s) URL without credentials, query, fragment or trailing slash, e.g. https://pool.example.com");

const POOL = {
  region,
  url: poolUrl,
  models: nameSet(modelName, 256),
  weight: z.number().finite().positive().max(1_000),
  status: z.enum(POOL_STATUSES),
  signing_key_id: SigningKeyId,
};

export const CreatePoolBody = z.strictObject({
  id: slug,
  region: POOL.region,
  url: POOL.url,
  models: POOL.models,
  weight: POOL.weight.default(1),
  status: POOL.status.default("active"),
  signing_key_id: POOL.signing_key_id,
});

export const UpdatePoolBody = z
  .strictObject({
    region: POOL.region.optional(),
    url: POOL.url.optional(),
    models: POOL.models.optional(),
    weight: POOL.weight.optional(),
    status: POOL.status.optional(),
    signing_key_id: POOL.signing_key_id.optional(),
  })
  .refine((body) => Object.keys(body).length > 0, "give at least one field to change");
