import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parseWorkload, type Workload, WorkloadError } from "./schema.js";

/*
 * Node-only: reading workload files. Kept apart so the schema and the generator
 * stay pure (usable in a Worker or a browser).
 */

export const BUILTIN_WORKLOADS = ["chat", "function-calling", "tree-search", "coding-agent", "mixed", "long-context-coding", "autellix", "tenant-churn"] as const;
export type BuiltinWorkloadName = (typeof BUILTIN_WORKLOADS)[number];

export function isBuiltinWorkload(name: string): name is BuiltinWorkloadName {
  return (BUILTIN_WORKLOADS as readonly string[]).includes(name);
}

/** Path of a built-in workload's JSON file. */
export function builtinWorkloadPath(name: BuiltinWorkloadName): string {
  return fileURLToPath(new URL(`./builtin/${name}.json`, import.meta.url));
}

/** Reads and validates a workload file; every failure is a WorkloadError naming the file. */
export async function loadWorkloadFile(path: string): Promise<Workload> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new WorkloadError([{ path: "", message: `cannot read the file: ${reason}` }], path);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new WorkloadError([{ path: "", message: `not valid JSON: ${reason}` }], path);
  }
  return parseWorkload(json, path);
}

/** A built-in name (`chat`, `mixed`, …) or a path to a workload file: what `--workload` takes. */
export function loadWorkload(nameOrPath: string): Promise<Workload> {
  return loadWorkloadFile(isBuiltinWorkload(nameOrPath) ? builtinWorkloadPath(nameOrPath) : nameOrPath);
}
