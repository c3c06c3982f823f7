import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

// One `vitest run` covers both halves: the edge inside workerd (real local D1 and
// Durable Objects), everything else in Node.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      // One worker per core, not vitest's default of cores − 1: that is one worker on the
      // 2-core CI machine, and the suite ran file after file (471 s against 330 s with two,
      // 2026-12-05). Most files spend their time waiting on sockets and child processes.
      maxWorkers: "100%",
      projects: [
        {
          plugins: [
            cloudflareTest({
              main: "./src/edge/index.ts",
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  // The edge refuses admin tokens under 32 characters (test/edge/support.ts ADMIN_TOKEN).
                  ADMIN_TOKEN: "test-admin-token-0123456789abcdef",
                  // Key "default"; the setup file registers pool "pool-test" (http://pool.test) with it.
                  POOL_SIGNING_SECRET: "test-signing-secret",
                  // One status round an hour: tests run rounds themselves (the monitor's alarm would read the fake pools mid-test).
                  POOL_STATUS_INTERVAL_MS: "3600000",
                  // Usage rows written at each settle, so tests read D1 after drain(); the batched
                  // ledger's own tests (test/edge/ledger-batch.test.ts) turn batching on per object.
                  LEDGER_FLUSH_MS: "0",
                },
              },
            }),
          ],
          test: {
            name: "edge",
            include: ["test/edge/**/*.test.ts"],
            setupFiles: ["./test/edge/apply-migrations.ts"],
          },
        },
        {
          test: {
            name: "node",
            environment: "node",
            include: ["test/**/*.test.ts"],
            exclude: ["test/edge/**", "node_modules/**"],
            testTimeout: 30_000,
            hookTimeout: 60_000,
          },
        },
      ],
    },
  };
});
