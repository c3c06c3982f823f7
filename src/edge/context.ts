import type { EdgeConfig, Env } from "./env.js";
import type { LimiterSnapshot } from "./limiter/types.js";
import type { TenantLimits } from "./limits/plan-limits.js";
import type { ModelAccess } from "./pools/directory.js";

/** The tenant a request authenticated as. */
export interface AuthenticatedTenant {
  id: string;
  name: string;
  /** Plan weight × tenant multiplier, for fair sharing in the pool (x-agentix-weight). */
  weight: number;
  keyId: string;
  planId: string;
  /** The plan's limits with the tenant's overrides applied. */
  limits: TenantLimits;
  /** Engine extensions the tenant may send beyond OpenAI's fields (its override, else its plan's). */
  allowedExtensions: readonly string[];
  /** The models and regions its plan allows (null: any), for the pool directory. */
  modelAccess: ModelAccess;
  /** Calls without a program header may join a program by their conversation. */
  programInference: boolean;
}

/** Hono's environment for every edge route. */
export interface EdgeEnv {
  Bindings: Env;
  Variables: {
    config: EdgeConfig;
    tenant: AuthenticatedTenant;
    /** The limiter's figures for this request, set once it was consulted (for the x-ratelimit-* headers). */
    rateLimit: LimiterSnapshot;
  };
}
