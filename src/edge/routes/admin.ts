import { Hono } from "hono";
import type { EdgeEnv } from "../context.js";
import { adminAuth } from "../middleware/admin-auth.js";
import { keyRoutes } from "./admin/keys.js";
import { planRoutes } from "./admin/plans.js";
import { poolRoutes } from "./admin/pools.js";
import { tenantRoutes } from "./admin/tenants.js";
import { usageExportRoutes } from "./admin/usage-export.js";

/** The admin API: plans, tenants, keys, usage export, the pool directory. Mounted at /admin behind the admin token. */
export function adminRoutes() {
  const admin = new Hono<EdgeEnv>();
  admin.use(adminAuth());
  admin.route("/plans", planRoutes());
  admin.route("/pools", poolRoutes());
  admin.route("/tenants", tenantRoutes());
  admin.route("/", keyRoutes());
  admin.route("/usage", usageExportRoutes());
  return admin;
}
