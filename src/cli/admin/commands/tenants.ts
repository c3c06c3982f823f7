import { formatCount, formatTable, formatTime } from "../table.js";
import {
  type CommandContext,
  type CommandSpec,
  listOption,
  nullableIntOption,
  numberOption,
  type OptionValues,
  printJson,
  requiredString,
  stringOption,
} from "../spec.js";
import { UsageError } from "../errors.js";
import { expectShape, listOf, TenantView } from "../views.js";

const HEADERS = ["ID", "NAME", "PLAN", "WEIGHT", "RPM", "TPM", "CONCURRENT", "PROGRAMS", "MONTHLY BUDGET", "CREATED"];

function row(t: TenantView): string[] {
  const l = t.limits;
  return [
    t.id,
    t.name,
    t.plan,
    String(l?.weight ?? t.weight),
    formatCount(l?.rpm),
    formatCount(l?.tpm),
    formatCount(l?.max_concurrent),
    formatCount(l?.max_active_programs),
    l ? formatCount(l.monthly_token_budget, "none") : "-",
    formatTime(t.created_at),
  ];
}

function printTenants(ctx: CommandContext, raw: unknown, tenants: TenantView[]): void {
  if (ctx.json) printJson(ctx.io, raw);
  else ctx.io.stdout(formatTable(HEADERS, tenants.map(row)));
}

async function showOne(ctx: CommandContext, raw: unknown): Promise<void> {
  printTenants(ctx, raw, [expectShape(TenantView, raw, "tenant")]);
}

const OVERRIDE_FLAGS = {
  rpm: "rpm",
  tpm: "tpm",
  "max-concurrent": "max_concurrent",
  "max-active-programs": "max_active_programs",
  "monthly-token-budget": "monthly_token_budget",
  "default-max-tokens": "default_max_tokens",
  "max-output-tokens": "max_output_tokens",
  "tool-events-per-minute": "tool_events_per_minute",
  "limiter-shards": "limiter_shards",
} as const;
/** A list, not a number: replaces the plan's extensions ("none": no extensions), or "inherit". */
const EXTENSIONS_FLAG = "allowed-extensions";
const INHERIT = ["inherit", "plan"];

function overridesBody(values: OptionValues): Record<string, number | string[] | null> {
  const body: Record<string, number | string[] | null> = {};
  for (const [flag, field] of Object.entries(OVERRIDE_FLAGS)) {
    const value = nullableIntOption(values, flag, INHERIT, flag === "monthly-token-budget" ? 0 : 1);
    if (value !== undefined) body[field] = value;
  }
  const extensions = listOption(values, EXTENSIONS_FLAG, INHERIT);
  if (extensions !== undefined) body.allowed_extensions = extensions;
  if (Object.keys(body).length === 0) {
    const flags = [...Object.keys(OVERRIDE_FLAGS), EXTENSIONS_FLAG].map((f) => `--${f}`).join(", ");
    throw new UsageError(`Give at least one of ${flags} (a value, or "inherit").`);
  }
  return body;
}

export const tenantCommands: Record<string, CommandSpec> = {
  create: {
    usage: "tenants create --name NAME [--plan PLAN] [--weight MULTIPLIER]",
    summary: "create a tenant (on the default plan unless --plan)",
    positionals: [],
    options: { name: { type: "string" }, plan: { type: "string" }, weight: { type: "string" } },
    async run(ctx, _positionals, values) {
      const plan = stringOption(values, "plan");
      const weight = numberOption(values, "weight");
      const raw = await ctx.client.json("POST", "/admin/tenants", {
        name: requiredString(values, "name"),
        ...(plan !== undefined ? { plan } : {}),
        ...(weight !== undefined ? { weight } : {}),
      });
      await showOne(ctx, raw);
    },
  },
  list: {
    usage: "tenants list",
    summary: "list tenants with their plan and limits in force",
    positionals: [],
    options: {},
    async run(ctx) {
      const raw = await ctx.client.json("GET", "/admin/tenants");
      printTenants(ctx, raw, expectShape(listOf(TenantView), raw, "tenant list").data);
    },
  },
  show: {
    usage: "tenants show TENANT_ID",
    summary: "show one tenant",
    positionals: ["TENANT_ID"],
    options: {},
    async run(ctx, [id]) {
      await showOne(ctx, await ctx.client.json("GET", `/admin/tenants/${encodeURIComponent(id ?? "")}`));
    },
  },
  "set-plan": {
    usage: "tenants set-plan TENANT_ID PLAN",
    summary: "move a tenant to another plan (applies from its next request)",
    positionals: ["TENANT_ID", "PLAN"],
    options: {},
    async run(ctx, [id, plan]) {
      await showOne(ctx, await ctx.client.json("PATCH", `/admin/tenants/${encodeURIComponent(id ?? "")}`, { plan }));
    },
  },
  "set-inference": {
    usage: "tenants set-inference TENANT_ID on|off",
    summary: "let calls without x-agentix-program join a program by their conversation (on, default) or not",
    positionals: ["TENANT_ID", "on|off"],
    options: {},
    async run(ctx, [id, value]) {
      if (value !== "on" && value !== "off") throw new UsageError(`Expected on or off, got ${JSON.stringify(value ?? "")}.`);
      await showOne(ctx, await ctx.client.json("PATCH", `/admin/tenants/${encodeURIComponent(id ?? "")}`, { program_inference: value === "on" }));
    },
  },
  override: {
    usage:
      "tenants override TENANT_ID [--rpm N] [--tpm N] [--max-concurrent N] [--max-active-programs N] " +
      "[--monthly-token-budget N] [--default-max-tokens N] [--max-output-tokens N] [--tool-events-per-minute N] [--limiter-shards N] " +
      "[--allowed-extensions NAME,…|none]   (each, or \"inherit\" to use the plan's)",
    summary: "override the plan's limits for one tenant",
    positionals: ["TENANT_ID"],
    options: Object.fromEntries([...Object.keys(OVERRIDE_FLAGS), EXTENSIONS_FLAG].map((flag) => [flag, { type: "string" as const }])),
    async run(ctx, [id], values) {
      const body = overridesBody(values);
      await showOne(ctx, await ctx.client.json("PATCH", `/admin/tenants/${encodeURIComponent(id ?? "")}/overrides`, body));
    },
  },
};
