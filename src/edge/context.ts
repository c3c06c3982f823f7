import type { TenantProfile } from "./auth/tenant-profile.js";
import type { EdgeConfig, Env } from "./env.js";
import type { LimiterSnapshot } from "./limiter/types.js";

/** The tenant a request authenticated as, and the key it used. */
export type AuthenticatedTenant = TenantProfile & { keyId: string };

/**
 * The key a request presented. `verified`: the limiter checked it for this request already;
 * otherwise the call's admission checks it (and the profile version its checks used).
 */
export interface TenantCredential {
  tenantId: string;
  keyHash: string;
  profileVersion: number;
  verified: boolean;
}

/** Hono's environment for every edge route. */
export interface EdgeEnv {
  Bindings: Env;
  Variables: {
    config: EdgeConfig;
    tenant: AuthenticatedTenant;
    credential: TenantCredential;
    /** The limiter's figures for this request, set once it was consulted (for the x-ratelimit-* headers). */
    rateLimit: LimiterSnapshot;
  };
}
