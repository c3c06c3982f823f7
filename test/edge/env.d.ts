import type { D1Migration } from "cloudflare:test";

// Types the test-only bindings and `exports` from "cloudflare:workers".
declare global {
  namespace Cloudflare {
    interface Env {
      DB: D1Database;
      TEST_MIGRATIONS: D1Migration[];
    }
    interface GlobalProps {
      mainModule: typeof import("../../src/edge/index");
    }
  }
}
