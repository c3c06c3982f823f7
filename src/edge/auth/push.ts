import { eq } from "drizzle-orm";
import { openAIError } from "../../protocol/errors.js";
import type { Database } from "../db/client.js";
import { tenants } from "../db/schema.js";
import type { Env } from "../env.js";
import { limiterShard, tenantLimiter } from "../limiter/access.js";

/*
 * The admin API's side of the limiter's copy of each tenant (auth/tenant-profile.ts):
 * after a change is in D1, the tenants it touches reload their profile and keys before
 * the admin call answers, so the change applies from each tenant's next request.
 */

/** Limiters asked at once when a plan change reaches many tenants. */
const REFRESH_PARALLELISM = 32;

/**
 * Reloads one tenant's profile in its limiter and, when it is or was sharded
 * (limiter/shards.ts), in every shard it ever had, so revocation and plan changes apply
 * on whichever shard a call reaches: also one beyond a lowered N, where an isolate still
 * holding the old profile would send a call (it is then refused as profile_changed).
 */
async function refreshTenant(env: Env, tenantId: string): Promise<void> {
  const first = await tenantLimiter(env, tenantId).refreshProfile({ tenantId });
  if (!first.ok || first.shards <= 1) return;
  const others = Array.from({ length: first.shards - 1 }, (_, i) => limiterShard(env, tenantId, i + 1).refreshProfile({ tenantId }));
  const answers = await Promise.allSettled(others);
  const failed = answers.find((answer) => answer.status === "rejected");
  if (failed) throw failed.reason;
}

/** Reloads these tenants' profiles in their limiters; a failure is a 503 telling the operator to repeat the change. */
export async function refreshTenantProfiles(env: Env, tenantIds: readonly string[]): Promise<void> {
  const failed: string[] = [];
  for (let i = 0; i < tenantIds.length; i += REFRESH_PARALLELISM) {
    const chunk = tenantIds.slice(i, i + REFRESH_PARALLELISM);
    const answers = await Promise.allSettled(chunk.map((tenantId) => refreshTenant(env, tenantId)));
    answers.forEach((answer, j) => {
      if (answer.status === "rejected") {
        console.error(`reloading tenant ${chunk[j]}'s profile in its limiter failed`, answer.reason);
        failed.push(chunk[j] ?? "");
      }
    });
  }
  if (failed.length > 0) {
    throw openAIError(
      503,
      `The change is saved but ${failed.length} tenant(s) may not see it yet (${failed.slice(0, 5).join(", ")}); repeat the request.`,
      { code: "profile_refresh_failed" },
    );
  }
}

/** Every tenant on a plan (a plan change reaches each of them). */
export async function tenantsOnPlan(db: Database, planId: string): Promise<string[]> {
  const rows = await db.select({ id: tenants.id }).from(tenants).where(eq(tenants.planId, planId));
  return rows.map((row) => row.id);
}
