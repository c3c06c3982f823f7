import { applyD1Migrations, env } from "cloudflare:test";

await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);

// The pool most tests call (test/edge/support.ts POOL_CHAT_URL): serves "test-model", signed with key "default".
await env.DB.prepare(
  `INSERT OR IGNORE INTO pools (id, region, url, models, weight, status, signing_key_id, created_at, updated_at)
   VALUES ('pool-test', 'us-east', 'http://pool.test', '["test-model"]', 1, 'active', 'default', 0, 0)`,
).run();
