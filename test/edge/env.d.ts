import type { D1Migration } from "cloudflare:test";
import type { Env as EdgeBindings } from "../../src/edge/env";

// Types the bindings (the edge's own plus test-only ones) and `exports` from "cloudflare:workers".
declare global {
  namespace Cloudflare {
    interface Env extends EdgeBindings {
      TEST_MIGRATIONS: D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../src/edge/index");
      durableNamespaces: "ProgramSession" | "TenantLimiter" | "PoolMonitor" | "ProgramIndex" | "UsageLedger";
    }
  }
}
