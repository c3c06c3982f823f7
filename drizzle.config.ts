import { defineConfig } from "drizzle-kit";

// D1 is SQLite. drizzle-kit writes numbered SQL files (0000_name.sql) that both
// `wrangler d1 migrations apply` and the tests' readD1Migrations pick up; its
// meta/ folder (snapshots) is ignored by both.
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/edge/db/schema.ts",
  out: "./migrations",
});
