import type { ParseArgsConfig } from "node:util";
import type { z } from "zod";
import type { AdminClient } from "./client.js";
import { UsageError } from "./errors.js";
import type { AdminIo } from "./io.js";
import { formatTable } from "./table.js";
import { expectShape, listOf } from "./views.js";

/** node:util does not export this name. */
export type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig["options"]>;

export type OptionValues = Record<string, string | boolean | undefined>;

export interface CommandContext {
  client: AdminClient;
  io: AdminIo;
  /** --json: print the edge's JSON instead of a table. */
  json: boolean;
}

/** One `agentix admin GROUP ACTION` command. */
export interface CommandSpec {
  /** Synopsis after "agentix admin", e.g. "keys create TENANT [--name NAME]". */
  usage: string;
  summary: string;
  /** Names of the positional arguments, all required. */
  positionals: string[];
  options: ParseArgsOptionsConfig;
  run: (ctx: CommandContext, positionals: string[], values: OptionValues) => Promise<void>;
}

export function stringOption(values: OptionValues, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

export function requiredString(values: OptionValues, name: string): string {
  const value = stringOption(values, name);
  if (value === undefined || value.trim() === "") throw new UsageError(`--${name} is required.`);
  return value;
}

/** Refuses a command line missing any of these flags, naming every one missing. */
export function requireFlags(values: OptionValues, flags: readonly string[]): void {
  const missing = flags.filter((flag) => stringOption(values, flag) === undefined);
  if (missing.length > 0) throw new UsageError(`Missing ${missing.map((f) => `--${f}`).join(", ")}.`);
}

/** A request body's fields without the absent (undefined) ones. */
export function definedFields<V>(fields: Record<string, V | undefined>): Record<string, V> {
  const body: Record<string, V> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) body[key] = value;
  return body;
}

/** A whole number ≥ min from a flag; undefined when the flag is absent. */
export function intOption(values: OptionValues, name: string, min = 1): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) < min || !Number.isSafeInteger(Number(raw))) {
    throw new UsageError(`--${name} must be a whole number${min > 0 ? ` of at least ${min}` : ""}, not "${raw}".`);
  }
  return Number(raw);
}

/** Like intOption, but one of `nullWords` (e.g. "none", "inherit") means null. */
export function nullableIntOption(values: OptionValues, name: string, nullWords: string[], min = 1): number | null | undefined {
  const raw = stringOption(values, name);
  if (raw !== undefined && nullWords.includes(raw)) return null;
  return intOption(values, name, min);
}

/**
 * A comma-separated list of names from a flag ("min_tokens,ignore_eos"); "" or
 * "none" is the empty list, one of `nullWords` (e.g. "inherit") null; undefined when
 * the flag is absent. The edge checks the names themselves.
 */
export function listOption(values: OptionValues, name: string, nullWords: string[] = []): string[] | null | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  if (nullWords.includes(raw)) return null;
  if (raw.trim() === "" || raw === "none") return [];
  const items = raw.split(",").map((item) => item.trim());
  if (items.some((item) => item === "")) throw new UsageError(`--${name} takes names separated by commas, not "${raw}".`);
  return items;
}

export function numberOption(values: OptionValues, name: string): number | undefined {
  const raw = stringOption(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n <= 0) throw new UsageError(`--${name} must be a positive number, not "${raw}".`);
  return n;
}

/** Writes a value as pretty JSON. */
export function printJson(io: AdminIo, value: unknown): void {
  io.stdout(`${JSON.stringify(value, null, 2)}\n`);
}

/** How a command shows one kind of admin object: its shape, its name in errors, and its table. */
export interface TableView<T extends z.ZodType> {
  schema: T;
  what: string;
  headers: string[];
  row: (item: z.infer<T>) => string[];
}

/** Prints one object: the edge's JSON with --json, else a one-row table. */
export function printOne<T extends z.ZodType>(ctx: CommandContext, view: TableView<T>, raw: unknown): void {
  if (ctx.json) return printJson(ctx.io, raw);
  ctx.io.stdout(formatTable(view.headers, [view.row(expectShape(view.schema, raw, view.what))]));
}

/** Prints a list answer (`{data:[…]}`): the edge's JSON with --json, else a table of its items. */
export function printList<T extends z.ZodType>(ctx: CommandContext, view: TableView<T>, raw: unknown): void {
  if (ctx.json) return printJson(ctx.io, raw);
  ctx.io.stdout(formatTable(view.headers, expectShape(listOf(view.schema), raw, `${view.what} list`).data.map(view.row)));
}
