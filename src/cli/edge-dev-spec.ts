import path from "node:path";
import { z } from "zod";

/* What the local stack asks of its edge process (edge-dev-server.ts), passed as JSON in EDGE_DEV_SPEC_ENV. */

export const EdgeDevSpec = z.object({
  /** wrangler.toml's path. */
  config: z.string(),
  host: z.string(),
  port: z.number().int().min(1).max(65_535),
  /** The local D1 and Durable Objects, as `wrangler dev --persist-to`. */
  persistDir: z.string(),
  /** Vars over wrangler.toml's, as `wrangler dev --var` (they hold secrets: not on the command line). */
  vars: z.record(z.string(), z.string()),
  logLevel: z.enum(["none", "error", "warn", "info", "log", "debug"]),
});
export type EdgeDevSpec = z.infer<typeof EdgeDevSpec>;

export const EDGE_DEV_SPEC_ENV = "AGENTIX_EDGE_DEV_SPEC";

/** The edge process's entry, for spawning it. */
export const edgeDevServerEntry = path.resolve(import.meta.dirname, "edge-dev-server.ts");
