import { UsageError } from "../errors.js";
import { formatTime } from "../table.js";
import {
  type CommandContext,
  type CommandSpec,
  definedFields,
  listOption,
  numberOption,
  type OptionValues,
  printList,
  printOne,
  requireFlags,
  stringOption,
  type TableView,
} from "../spec.js";
import { PoolView } from "../views.js";

const HEADERS = ["ID", "REGION", "STATUS", "HEALTH", "LOAD", "WEIGHT", "KEY ID", "MODELS", "UPDATED", "URL"];

/** The edge's last reading: "ok" or "down", "unread" before the first, "-" from an edge that does not say. */
const health = (h: PoolView["health"]) => (h === undefined ? "-" : h === null ? "unread" : h.healthy ? "ok" : "down");

const row = (p: PoolView) => [
  p.id,
  p.region,
  p.status,
  health(p.health),
  p.health ? String(p.health.load) : "-",
  String(p.weight),
  p.signing_key_id,
  p.models.join(","),
  formatTime(p.updated_at),
  p.url,
];

const POOL_TABLE: TableView<typeof PoolView> = { schema: PoolView, what: "pool", headers: HEADERS, row };
const printPool = (ctx: CommandContext, raw: unknown) => printOne(ctx, POOL_TABLE, raw);

/** `--pool-url`, not `--url`: that one is every command's edge URL. */
const POOL_OPTIONS = {
  region: { type: "string" },
  "pool-url": { type: "string" },
  models: { type: "string" },
  weight: { type: "string" },
  "key-id": { type: "string" },
  status: { type: "string" },
} as const;

/** The pool fields given on the command line (the edge checks them). */
function poolFields(values: OptionValues): Record<string, string | number | string[]> {
  const models = listOption(values, "models") ?? undefined;
  if (models?.length === 0) throw new UsageError("--models must name at least one model.");
  return definedFields<string | number | string[]>({
    region: stringOption(values, "region"),
    url: stringOption(values, "pool-url"),
    models,
    weight: numberOption(values, "weight"),
    signing_key_id: stringOption(values, "key-id"),
    status: stringOption(values, "status"),
  });
}

const poolPath = (id: string | undefined) => `/admin/pools/${encodeURIComponent(id ?? "")}`;

/** `pools drain|disable|activate ID`: POST /admin/pools/{id}/{action}. */
const statusCommand = (action: string, summary: string): CommandSpec => ({
  usage: `pools ${action} ID`,
  summary,
  positionals: ["ID"],
  options: {},
  async run(ctx, [id]) {
    printPool(ctx, await ctx.client.json("POST", `${poolPath(id)}/${action}`));
  },
});

export const poolCommands: Record<string, CommandSpec> = {
  list: {
    usage: "pools list",
    summary: "list the pool directory",
    positionals: [],
    options: {},
    async run(ctx) {
      printList(ctx, POOL_TABLE, await ctx.client.json("GET", "/admin/pools"));
    },
  },
  show: {
    usage: "pools show ID",
    summary: "show one pool",
    positionals: ["ID"],
    options: {},
    async run(ctx, [id]) {
      printPool(ctx, await ctx.client.json("GET", poolPath(id)));
    },
  },
  add: {
    usage: "pools add ID --region REGION --pool-url URL --models MODEL,… --key-id KEY_ID [--weight W] [--status active|draining|disabled]",
    summary: "add a pool to the directory (the signing secret for KEY_ID stays a Worker secret)",
    positionals: ["ID"],
    options: POOL_OPTIONS,
    async run(ctx, [id], values) {
      requireFlags(values, ["region", "pool-url", "models", "key-id"]);
      printPool(ctx, await ctx.client.json("POST", "/admin/pools", { id, ...poolFields(values) }));
    },
  },
  update: {
    usage: "pools update ID [--region REGION] [--pool-url URL] [--models MODEL,…] [--key-id KEY_ID] [--weight W] [--status S]",
    summary: "change a pool (applies from the next request)",
    positionals: ["ID"],
    options: POOL_OPTIONS,
    async run(ctx, [id], values) {
      const fields = poolFields(values);
      if (Object.keys(fields).length === 0) throw new UsageError("Give at least one field to change.");
      printPool(ctx, await ctx.client.json("PATCH", poolPath(id), fields));
    },
  },
  drain: statusCommand("drain", "stop sending a pool new programs; it keeps serving the programs it has"),
  disable: statusCommand("disable", "send a pool nothing"),
  activate: statusCommand("activate", "send a pool new programs again"),
};
