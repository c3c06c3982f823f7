import { parseArgs } from "node:util";
import { AdminClient } from "./admin/client.js";
import { keyCommands } from "./admin/commands/keys.js";
import { planCommands } from "./admin/commands/plans.js";
import { poolCommands } from "./admin/commands/pools.js";
import { tenantCommands } from "./admin/commands/tenants.js";
import { usageCommands } from "./admin/commands/usage.js";
import { CREDENTIALS_PATH, resolveConnection } from "./admin/connection.js";
import { AdminHttpError, ConnectionError, UsageError } from "./admin/errors.js";
import type { AdminIo } from "./admin/io.js";
import type { CommandSpec, OptionValues, ParseArgsOptionsConfig } from "./admin/spec.js";

export type { AdminIo } from "./admin/io.js";

/*
 * `agentix admin …`: the edge's admin API from the command line. Exit codes:
 * 0 done, 1 the edge refused or could not be reached (its OpenAI error
 * message is shown), 2 the command line was wrong.
 */

const GROUPS: Record<string, Record<string, CommandSpec>> = {
  tenants: tenantCommands,
  keys: keyCommands,
  plans: planCommands,
  pools: poolCommands,
  usage: usageCommands,
};

const GLOBAL_OPTIONS = {
  url: { type: "string" },
  "admin-token": { type: "string" },
  json: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsOptionsConfig;

function helpText(): string {
  const lines = Object.values(GROUPS).flatMap((group) =>
    Object.values(group).map((spec) => `  agentix admin ${spec.usage}\n      ${spec.summary}`),
  );
  return [
    "Usage: agentix admin <command> [options]",
    "",
    "Commands:",
    ...lines,
    "",
    "Options (any command):",
    "  --url URL            the edge's base URL (default: $AGENTIX_URL, else edgeUrl in " + CREDENTIALS_PATH + ")",
    "  --admin-token TOKEN  the admin token (default: $AGENTIX_ADMIN_TOKEN, else adminToken in " + CREDENTIALS_PATH + ")",
    "  --json               print the edge's JSON instead of a table",
    "  -h, --help           this help",
    "",
  ].join("\n");
}

function commandHelp(spec: CommandSpec): string {
  return `Usage: agentix admin ${spec.usage}\n  ${spec.summary}\n`;
}

/** Runs `agentix admin <argv…>` and resolves to the process exit code. */
export async function runAdminCommand(argv: string[], io: AdminIo): Promise<number> {
  const [groupName, actionName, ...rest] = argv;
  if (groupName === undefined || groupName === "help" || groupName === "--help" || groupName === "-h") {
    io.stdout(helpText());
    return groupName === undefined ? 2 : 0;
  }
  const group = GROUPS[groupName];
  if (!group) {
    io.stderr(`agentix admin: unknown command "${groupName}".\n\n${helpText()}`);
    return 2;
  }
  const spec = actionName === undefined ? undefined : group[actionName];
  if (!spec) {
    const actions = Object.keys(group).join(", ");
    io.stderr(`agentix admin ${groupName}: ${actionName === undefined ? "missing" : `unknown action "${actionName}";`} choose one of: ${actions}.\n`);
    return 2;
  }

  let positionals: string[];
  let values: OptionValues;
  try {
    const parsed = parseArgs({
      args: rest,
      options: { ...GLOBAL_OPTIONS, ...spec.options },
      allowPositionals: true,
      strict: true,
    });
    positionals = parsed.positionals;
    values = parsed.values as OptionValues;
  } catch (error) {
    io.stderr(`agentix admin: ${error instanceof Error ? error.message : String(error)}\n${commandHelp(spec)}`);
    return 2;
  }
  if (values.help === true) {
    io.stdout(commandHelp(spec));
    return 0;
  }
  if (positionals.length !== spec.positionals.length) {
    const expected = spec.positionals.length === 0 ? "no arguments" : spec.positionals.join(" ");
    io.stderr(`agentix admin: expected ${expected}, got ${positionals.length === 0 ? "none" : positionals.join(" ")}.\n${commandHelp(spec)}`);
    return 2;
  }

  try {
    const connection = await resolveConnection(
      {
        url: typeof values.url === "string" ? values.url : undefined,
        adminToken: typeof values["admin-token"] === "string" ? values["admin-token"] : undefined,
      },
      io.env,
      io.cwd,
    );
    const client = new AdminClient(connection, io.fetch ?? globalThis.fetch);
    await spec.run({ client, io, json: values.json === true }, positionals, values);
    return 0;
  } catch (error) {
    if (error instanceof UsageError) {
      io.stderr(`agentix admin: ${error.message}\n${commandHelp(spec)}`);
      return 2;
    }
    if (error instanceof AdminHttpError) {
      io.stderr(`agentix admin: HTTP ${error.status}${error.code ? ` (${error.code})` : ""}: ${error.message}\n`);
      return 1;
    }
    if (error instanceof ConnectionError) {
      io.stderr(`agentix admin: ${error.message}\n`);
      return 1;
    }
    io.stderr(`agentix admin: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}
