import { writeFile } from "node:fs/promises";
import path from "node:path";
import { UsageError } from "../errors.js";
import { type CommandSpec, printJson, requiredString, stringOption } from "../spec.js";
import { expectShape, UsageExportView } from "../views.js";

const PERIOD = /^\d{4}-(0[1-9]|1[0-2])$/;

export const usageCommands: Record<string, CommandSpec> = {
  export: {
    usage: "usage export --period YYYY-MM [--format csv|json] [--out FILE]",
    summary: "export a billing period's usage, one line per tenant plus totals (CSV by default)",
    positionals: [],
    options: { period: { type: "string" }, format: { type: "string" }, out: { type: "string" } },
    async run(ctx, _positionals, values) {
      const period = requiredString(values, "period");
      if (!PERIOD.test(period)) throw new UsageError(`--period must be a month as YYYY-MM, not "${period}".`);
      const format = stringOption(values, "format") ?? (ctx.json ? "json" : "csv");
      if (format !== "csv" && format !== "json") throw new UsageError(`--format must be csv or json, not "${format}".`);
      const query = `/admin/usage/export?period=${period}&format=${format}`;
      let content: string;
      let summary = "";
      if (format === "json") {
        const raw = await ctx.client.json("GET", query);
        const parsed = expectShape(UsageExportView, raw, "usage export");
        content = `${JSON.stringify(raw, null, 2)}\n`;
        summary = `${parsed.data.length} tenants, ${parsed.totals.calls} calls, ${parsed.totals.total_tokens} tokens`;
      } else {
        content = await ctx.client.text("GET", query);
        summary = `${Math.max(0, content.trimEnd().split("\n").length - 2)} tenants`;
      }
      const out = stringOption(values, "out");
      if (out === undefined) {
        ctx.io.stdout(content);
        return;
      }
      const file = path.resolve(ctx.io.cwd, out);
      await writeFile(file, content, "utf8");
      if (ctx.json) printJson(ctx.io, { written: file, period, format });
      else ctx.io.stdout(`Wrote ${file} (${period}, ${summary}).\n`);
    },
  },
};
