import type { EdgeConfig, Env } from "./env.js";

/** The tenant a request authenticated as. */
export interface AuthenticatedTenant {
  id: string;
  name: string;
  /** Plan weight for fair sharing in the pool. */
  weight: number;
  keyId: string;
}

/** Hono's environment for every edge route. */
export interface EdgeEnv {
  Bindings: Env;
  Variables: {
    config: EdgeConfig;
    tenant: AuthenticatedTenant;
  };
}
