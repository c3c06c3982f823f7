import { applyD1Migrations, env, reset } from "cloudflare:test";
import { refreshPoolSnapshot } from "../../src/edge/pools/directory-cache";
import { breakerOf, noteAnsweredLoad } from "../../src/edge/pools/routing";

/*
 * Runs before each test file. The edge project shares one workerd across files
 * (vitest.config.ts isolate: false), so each file first drops what an earlier one
 * left: every Durable Object's storage, alarms and instance, and D1 (reset() wipes
 * both; an old ledger's alarm would otherwise retry its batch into this file's D1).
 */
await reset();

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);

// The pool most tests call (test/edge/support.ts POOL_CHAT_URL): serves "test-model", signed with key "default".
await env.DB.prepare(
  `INSERT OR IGNORE INTO pools (id, region, url, models, weight, status, signing_key_id, created_at, updated_at)
   VALUES ('pool-test', 'us-east', 'http://pool.test', '["test-model"]', 1, 'active', 'default', 0, 0)`,
).run();

// Module state outlives the reset: this isolate's copy of the directory (an earlier file's copy
// named its pools), and the test pool's breaker and last stated load.
await refreshPoolSnapshot(env);
breakerOf("pool-test").succeeded();
// An answer from the epoch: too old to steer by, so routing drops it.
noteAnsweredLoad("pool-test", 0, 0);
