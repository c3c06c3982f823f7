import { UsageError } from "../errors.js";
import { formatCount, formatTable } from "../table.js";
import {
  type CommandContext,
  type CommandSpec,
  intOption,
  listOption,
  nullableIntOption,
  numberOption,
  type OptionValues,
  printJson,
  requiredString,
  stringOption,
} from "../spec.js";
import { expectShape, listOf, PlanView } from "../views.js";

const HEADERS = [
  "ID",
  "NAME",
  "RPM",
  "TPM",
  "CONCURRENT",
  "PROGRAMS",
  "MONTHLY BUDGET",
  "DEFAULT MAX TOKENS",
  "MAX OUTPUT",
  "WEIGHT",
  "TOOL EVENTS/MIN",
  "EXTENSIONS",
];

const row = (p: PlanView) => [
  p.id,
  p.name,
  String(p.rpm),
  String(p.tpm),
  String(p.max_concurrent),
  String(p.max_active_programs),
  formatCount(p.monthly_token_budget, "none"),
  String(p.default_max_tokens),
  formatCount(p.max_output_tokens, p.max_output_tokens === null ? "none" : "-"),
  String(p.weight),
  formatCount(p.tool_events_per_minute),
  p.allowed_extensions === undefined ? "-" : p.allowed_extensions.join(",") || "none",
];

const LIMIT_OPTIONS = {
  name: { type: "string" },
  rpm: { type: "string" },
  tpm: { type: "string" },
  "max-concurrent": { type: "string" },
  "max-active-programs": { type: "string" },
  "monthly-token-budget": { type: "string" },
  "default-max-tokens": { type: "string" },
  "max-output-tokens": { type: "string" },
  "allowed-extensions": { type: "string" },
  "tool-events-per-minute": { type: "string" },
  weight: { type: "string" },
} as const;

/**
 * The plan fields given on the command line; `--monthly-token-budget none` means no
 * budget, `--max-output-tokens none` no cap, `--allowed-extensions none` (or "") none.
 */
function planFields(values: OptionValues): Record<string, string | number | string[] | null> {
  const fields: Record<string, string | number | string[] | null | undefined> = {
    name: stringOption(values, "name"),
    rpm: intOption(values, "rpm"),
    tpm: intOption(values, "tpm"),
    max_concurrent: intOption(values, "max-concurrent"),
    max_active_programs: intOption(values, "max-active-programs"),
    monthly_token_budget: nullableIntOption(values, "monthly-token-budget", ["none"], 0),
    default_max_tokens: intOption(values, "default-max-tokens"),
    max_output_tokens: nullableIntOption(values, "max-output-tokens", ["none"]),
    allowed_extensions: listOption(values, "allowed-extensions"),
    tool_events_per_minute: intOption(values, "tool-events-per-minute"),
    weight: numberOption(values, "weight"),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Record<
    string,
    string | number | string[] | null
  >;
}

function printPlan(ctx: CommandContext, raw: unknown): void {
  if (ctx.json) return printJson(ctx.io, raw);
  ctx.io.stdout(formatTable(HEADERS, [row(expectShape(PlanView, raw, "plan"))]));
}

const REQUIRED_FOR_CREATE = ["name", "rpm", "tpm", "max-concurrent", "max-active-programs", "monthly-token-budget", "default-max-tokens"];

export const planCommands: Record<string, CommandSpec> = {
  list: {
    usage: "plans list",
    summary: "list plans",
    positionals: [],
    options: {},
    async run(ctx) {
      const raw = await ctx.client.json("GET", "/admin/plans");
      if (ctx.json) return printJson(ctx.io, raw);
      ctx.io.stdout(formatTable(HEADERS, expectShape(listOf(PlanView), raw, "plan list").data.map(row)));
    },
  },
  create: {
    usage:
      "plans create --id ID --name NAME --rpm N --tpm N --max-concurrent N --max-active-programs N " +
      "--monthly-token-budget N|none --default-max-tokens N [--max-output-tokens N|none] " +
      "[--allowed-extensions NAME,…|none] [--tool-events-per-minute N] [--weight W]",
    summary: "create a plan",
    positionals: [],
    options: { id: { type: "string" }, ...LIMIT_OPTIONS },
    async run(ctx, _positionals, values) {
      const missing = REQUIRED_FOR_CREATE.filter((flag) => stringOption(values, flag) === undefined);
      if (missing.length > 0) throw new UsageError(`Missing ${missing.map((f) => `--${f}`).join(", ")}.`);
      printPlan(ctx, await ctx.client.json("POST", "/admin/plans", { id: requiredString(values, "id"), ...planFields(values) }));
    },
  },
  update: {
    usage:
      "plans update ID [--name NAME] [--rpm N] [--tpm N] [--max-concurrent N] [--max-active-programs N] " +
      "[--monthly-token-budget N|none] [--default-max-tokens N] [--max-output-tokens N|none] " +
      "[--allowed-extensions NAME,…|none] [--tool-events-per-minute N] [--weight W]",
    summary: "change a plan (applies to its tenants from their next request)",
    positionals: ["ID"],
    options: LIMIT_OPTIONS,
    async run(ctx, [id], values) {
      const fields = planFields(values);
      if (Object.keys(fields).length === 0) throw new UsageError("Give at least one field to change.");
      printPlan(ctx, await ctx.client.json("PATCH", `/admin/plans/${encodeURIComponent(id ?? "")}`, fields));
    },
  },
};
