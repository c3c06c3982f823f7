import { Hono } from "hono";
import { z } from "zod";
import { invalidRequest } from "../../protocol/errors.js";
import type { EdgeEnv } from "../context.js";
import { database } from "../db/client.js";
import { DAY_MS, dayKeyOf, parseDay, periodOf } from "../limits/period.js";
import { figuresView } from "../usage/figures.js";
import { tenantLedgerHeld } from "../ledger/tenant-status.js";
import { ledgerFreshness } from "../usage/freshness.js";
import { tenantUsage } from "../usage/queries.js";

/** A longer range would be a full-ledger scan for one tenant; ask for it in pieces. */
export const MAX_USAGE_RANGE_DAYS = 366;

const day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, "must be a date as YYYY-MM-DD")
  .transform((key, ctx) => {
    const ms = parseDay(key);
    if (ms === undefined) {
      ctx.addIssue({ code: "custom", message: "must be a date as YYYY-MM-DD" });
      return z.NEVER;
    }
    return ms;
  });

/** The query's parameters as sent (the OpenAPI document shows these); UsageQuery checks the range. */
export const UsageQueryParams = z.strictObject({
  group_by: z.enum(["day", "program"]).default("day"),
  from: day.optional().describe("First day, inclusive (UTC). Default: the first day of the current month."),
  to: day.optional().describe(`Last day, inclusive (UTC). Default: today. At most ${MAX_USAGE_RANGE_DAYS} days from \`from\`.`),
});

const UsageQuery = UsageQueryParams
  .transform((q, ctx) => {
    const now = Date.now();
    const fromMs = q.from ?? periodOf(now).startMs;
    const toMs = (q.to ?? Math.floor(now / DAY_MS) * DAY_MS) + DAY_MS;
    if (toMs <= fromMs) {
      ctx.addIssue({ code: "custom", path: ["to"], message: "must not be before from" });
      return z.NEVER;
    }
    if (toMs - fromMs > MAX_USAGE_RANGE_DAYS * DAY_MS) {
      ctx.addIssue({ code: "custom", path: ["to"], message: `the range may span at most ${MAX_USAGE_RANGE_DAYS} days` });
      return z.NEVER;
    }
    return { groupBy: q.group_by, fromMs, toMs };
  });

/**
 * GET /v1/usage?group_by=day|program&from=YYYY-MM-DD&to=YYYY-MM-DD: the
 * authenticated tenant's own metered usage (never anyone else's), by UTC day
 * or by program, with totals. Calls count on the day they settled.
 */
export function usageRoutes() {
  const routes = new Hono<EdgeEnv>();

  routes.get("/", async (c) => {
    const parsed = UsageQuery.safeParse(c.req.query());
    if (!parsed.success) throw invalidRequest(parsed.error);
    const { groupBy, fromMs, toMs } = parsed.data;
    // What the ledger holds is read first: a row it sends meanwhile is then in the figures, not missing from both.
    const held = await tenantLedgerHeld(c.env, c.var.tenant.id);
    const now = Date.now();
    const { groups, totals } = await tenantUsage(database(c.env.DB), c.var.tenant.id, { fromMs, toMs }, groupBy);
    return c.json({
      object: "list" as const,
      ...ledgerFreshness(c.var.config, now, held),
      group_by: groupBy,
      from: dayKeyOf(fromMs),
      to: dayKeyOf(toMs - DAY_MS),
      data: groups.map((g) =>
        groupBy === "day" ? { day: g.key, ...figuresView(g) } : { program_id: g.key, ...figuresView(g) },
      ),
      totals: figuresView(totals),
    });
  });

  return routes;
}
