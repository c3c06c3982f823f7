import { UsageError } from "../errors.js";
import { formatCount } from "../table.js";
import {
  type CommandContext,
  type CommandSpec,
  definedFields,
  intOption,
  listOption,
  nullableIntOption,
  numberOption,
  type OptionValues,
  printList,
  printOne,
  requiredString,
  requireFlags,
  stringOption,
  type TableView,
} from "../spec.js";
import { PlanView } from "../views.js";

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
  "MODELS",
  "REGIONS",
];

/** A plan's model or region restriction: null is none ("any"); absent (an older edge) "-". */
const restriction = (names: string[] | null | undefined) => (names === undefined ? "-" : names === null ? "any" : names.join(","));

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
  restriction(p.allowed_models),
  restriction(p.allowed_regions),
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
  "limiter-shards": { type: "string" },
  weight: { type: "string" },
  "allowed-models": { type: "string" },
  "allowed-regions": { type: "string" },
} as const;

/** `--allowed-models any` / `--allowed-regions any`: no restriction. */
const ANY = ["any"];

/**
 * The plan fields given on the command line; `--monthly-token-budget none` means no
 * budget, `--max-output-tokens none` no cap, `--allowed-extensions none` (or "") none,
 * `--allowed-models any` / `--allowed-regions any` no restriction.
 */
function planFields(values: OptionValues): Record<string, string | number | string[] | null> {
  return definedFields<string | number | string[] | null>({
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
    limiter_shards: intOption(values, "limiter-shards"),
    weight: numberOption(values, "weight"),
    allowed_models: listOption(values, "allowed-models", ANY),
    allowed_regions: listOption(values, "allowed-regions", ANY),
  });
}

const PLAN_TABLE: TableView<typeof PlanView> = { schema: PlanView, what: "plan", headers: HEADERS, row };
const printPlan = (ctx: CommandContext, raw: unknown) => printOne(ctx, PLAN_TABLE, raw);

const REQUIRED_FOR_CREATE = ["name", "rpm", "tpm", "max-concurrent", "max-active-programs", "monthly-token-budget", "default-max-tokens"];

export const planCommands: Record<string, CommandSpec> = {
  list: {
    usage: "plans list",
    summary: "list plans",
    positionals: [],
    options: {},
    async run(ctx) {
      printList(ctx, PLAN_TABLE, await ctx.client.json("GET", "/admin/plans"));
    },
  },
  create: {
    usage:
      "plans create --id ID --name NAME --rpm N --tpm N --max-concurrent N --max-active-programs N " +
      "--monthly-token-budget N|none --default-max-tokens N [--max-output-tokens N|none] " +
      "[--allowed-extensions NAME,…|none] [--tool-events-per-minute N] [--limiter-shards N] [--weight W] " +
      "[--allowed-models MODEL,…|any] [--allowed-regions REGION,…|any]",
    summary: "create a plan (models and regions: any unless restricted)",
    positionals: [],
    options: { id: { type: "string" }, ...LIMIT_OPTIONS },
    async run(ctx, _positionals, values) {
      requireFlags(values, REQUIRED_FOR_CREATE);
      printPlan(ctx, await ctx.client.json("POST", "/admin/plans", { id: requiredString(values, "id"), ...planFields(values) }));
    },
  },
  update: {
    usage:
      "plans update ID [--name NAME] [--rpm N] [--tpm N] [--max-concurrent N] [--max-active-programs N] " +
      "[--monthly-token-budget N|none] [--default-max-tokens N] [--max-output-tokens N|none] " +
      "[--allowed-extensions NAME,…|none] [--tool-events-per-minute N] [--limiter-shards N] [--weight W] " +
      "[--allowed-models MODEL,…|any] [--allowed-regions REGION,…|any]",
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
