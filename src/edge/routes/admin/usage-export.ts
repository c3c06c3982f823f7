import { Hono } from "hono";
import { z } from "zod";
import { invalidRequest } from "../../../protocol/errors.js";
import type { EdgeEnv } from "../../context.js";
import { database } from "../../db/client.js";
import { tenants as tenantsTable } from "../../db/schema.js";
import { parsePeriod } from "../../limits/period.js";
import { csvLine } from "../../usage/csv.js";
import { Header } from "../../../protocol/headers.js";
import { figuresView } from "../../usage/figures.js";
import { tenantsLedgerHeld } from "../../ledger/tenant-status.js";
import { ledgerFreshness } from "../../usage/freshness.js";
import { periodUsage } from "../../usage/queries.js";

/** GET /admin/usage/export's query (the OpenAPI document is generated from it). */
export const ExportQuery = z.strictObject({
  period: z.string().regex(/^\d{4}-\d{2}$/, "must be a month as YYYY-MM").describe("A calendar month (UTC), YYYY-MM.").transform((key, ctx) => {
    const period = parsePeriod(key);
    if (!period) {
      ctx.addIssue({ code: "custom", message: "must be a month as YYYY-MM" });
      return z.NEVER;
    }
    return period;
  }),
  format: z.enum(["csv", "json"]).default("json"),
});

const CSV_COLUMNS = [
  "period",
  "tenant_id",
  "tenant_name",
  "plan",
  "calls",
  "prompt_tokens",
  "cached_tokens",
  "completion_tokens",
  "total_tokens",
  "service_ms",
] as const;

/** The tenant ID of the CSV's last line, which carries the ledger's totals for the period. */
export const CSV_TOTALS_ID = "TOTAL";

/**
 * GET /admin/usage/export?period=YYYY-MM&format=csv|json: one line per tenant
 * (every tenant, zeros included) for a calendar month (UTC, by settle time),
 * and the ledger's totals for the period (JSON `totals`; CSV last line TOTAL).
 * `plan` is the tenant's plan now, not necessarily during the period.
 */
export function usageExportRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.get("/export", async (c) => {
    const parsed = ExportQuery.safeParse(c.req.query());
    if (!parsed.success) throw invalidRequest(parsed.error);
    const { period } = parsed.data;
    const db = database(c.env.DB);
    // Every tenant's ledger, read before the figures (a row it sends meanwhile is then in them, not missing from both).
    const tenantIds = (await db.select({ id: tenantsTable.id }).from(tenantsTable)).map((row) => row.id);
    const held = await tenantsLedgerHeld(c.env, tenantIds);
    const now = Date.now();
    const { tenants, totals } = await periodUsage(db, period);
    const freshness = ledgerFreshness(c.var.config, now, held);
    const lines = tenants.map((t) => ({ tenant_id: t.tenantId, tenant_name: t.tenantName, plan: t.planId, ...figuresView(t) }));
    const totalsView = figuresView(totals);

    if (parsed.data.format === "json") {
      return c.json({
        object: "usage_export" as const,
        period: period.key,
        ...freshness,
        from: new Date(period.startMs).toISOString(),
        to: new Date(period.endMs).toISOString(),
        data: lines,
        totals: totalsView,
      });
    }
    let csv = csvLine([...CSV_COLUMNS]);
    for (const line of lines) csv += csvLine([period.key, ...CSV_COLUMNS.slice(1).map((k) => line[k as keyof typeof line])]);
    csv += csvLine([
      period.key,
      CSV_TOTALS_ID,
      "",
      "",
      totalsView.calls,
      totalsView.prompt_tokens,
      totalsView.cached_tokens,
      totalsView.completion_tokens,
      totalsView.total_tokens,
      totalsView.service_ms,
    ]);
    return c.body(csv, 200, {
      "content-type": "text/csv; charset=utf-8",
      "content-disposition": `attachment; filename="agentix-usage-${period.key}.csv"`,
      [Header.dataAsOf]: freshness.data_as_of,
      [Header.ledgerQuarantinedRows]: String(freshness.ledger_quarantined_rows),
    });
  });

  return routes;
}
