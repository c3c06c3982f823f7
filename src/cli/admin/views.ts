import { z } from "zod";

/*
 * The admin API's objects as the CLI reads them. Loose: fields the CLI does
 * not show pass through to --json output untouched.
 */

const nullableInt = z.number().nullable();

export const PlanView = z.looseObject({
  id: z.string(),
  name: z.string(),
  rpm: z.number(),
  tpm: z.number(),
  max_concurrent: z.number(),
  max_active_programs: z.number(),
  monthly_token_budget: nullableInt,
  default_max_tokens: z.number(),
  // Optional: an edge from before these fields still answers.
  max_output_tokens: nullableInt.optional(),
  allowed_extensions: z.array(z.string()).optional(),
  tool_events_per_minute: z.number().optional(),
  weight: z.number(),
  /** null: any model / any region. */
  allowed_models: z.array(z.string()).nullable().optional(),
  allowed_regions: z.array(z.string()).nullable().optional(),
});
export type PlanView = z.infer<typeof PlanView>;

export const PoolView = z.looseObject({
  id: z.string(),
  region: z.string(),
  url: z.string(),
  models: z.array(z.string()),
  weight: z.number(),
  status: z.string(),
  signing_key_id: z.string(),
  created_at: z.number(),
  updated_at: z.number(),
  /** The edge's last status reading; null: not read yet; absent: an older edge. */
  health: z.looseObject({ healthy: z.boolean(), load: z.number(), read_at: z.number(), error: z.string().optional() }).nullable().optional(),
});
export type PoolView = z.infer<typeof PoolView>;

export const TenantView = z.looseObject({
  id: z.string(),
  name: z.string(),
  plan: z.string(),
  weight: z.number(),
  created_at: z.number(),
  limits: z
    .looseObject({
      rpm: z.number(),
      tpm: z.number(),
      max_concurrent: z.number(),
      max_active_programs: z.number(),
      monthly_token_budget: nullableInt,
      weight: z.number(),
    })
    .nullable(),
});
export type TenantView = z.infer<typeof TenantView>;

export const KeyView = z.looseObject({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string().nullable(),
  prefix: z.string(),
  created_at: z.number(),
  revoked_at: z.number().nullable(),
  last_used_at: z.number().nullable(),
  key: z.string().optional(),
});
export type KeyView = z.infer<typeof KeyView>;

export const listOf = <T extends z.ZodType>(item: T) => z.looseObject({ data: z.array(item) });

const Figures = z.looseObject({
  calls: z.number(),
  prompt_tokens: z.number(),
  cached_tokens: z.number(),
  completion_tokens: z.number(),
  total_tokens: z.number(),
  service_ms: z.number(),
});

export const UsageExportView = z.looseObject({
  period: z.string(),
  data: z.array(Figures.extend({ tenant_id: z.string(), tenant_name: z.string(), plan: z.string() })),
  totals: Figures,
});

/** Parses an answer, saying plainly when the edge speaks another version of the API. */
export function expectShape<T extends z.ZodType>(schema: T, value: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new Error(`Unexpected ${what} from the edge: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
