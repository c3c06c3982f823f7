import { drizzle } from "drizzle-orm/d1";

export type Database = ReturnType<typeof database>;

/**
 * A drizzle handle on D1. Built per request, so without the schema: the
 * relational query API (`db.query.*`) is unused, and building its config from
 * the schema is measurable CPU on every request.
 */
export function database(d1: D1Database) {
  return drizzle(d1);
}
