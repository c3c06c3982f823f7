import type { Env } from "../env.js";
import type { UsageLedger } from "./usage-ledger.js";

/** The tenant's usage ledger: one object per tenant, named by its ID, shared by all its programs. */
export function usageLedger(env: Env, tenantId: string): DurableObjectStub<UsageLedger> {
  return env.USAGE_LEDGER.get(env.USAGE_LEDGER.idFromName(tenantId));
}
