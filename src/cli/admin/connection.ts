import { readFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { UsageError } from "./errors.js";

/** What the local stack writes for the CLI (other fields are ignored). */
const Credentials = z.looseObject({
  adminToken: z.string().min(1).optional(),
  edgeUrl: z.string().min(1).optional(),
});

export const CREDENTIALS_PATH = path.join(".agentix", "credentials.json");

export interface Connection {
  baseUrl: string;
  adminToken: string;
}

async function readCredentials(cwd: string): Promise<z.infer<typeof Credentials>> {
  const file = path.resolve(cwd, CREDENTIALS_PATH);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch {
    return {};
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new UsageError(`${file} is not valid JSON.`);
  }
  const parsed = Credentials.safeParse(json);
  if (!parsed.success) throw new UsageError(`${file} does not look like Agentix credentials: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** Base URL and admin token: flags first, then AGENTIX_URL / AGENTIX_ADMIN_TOKEN, then the local stack's credentials file. */
export async function resolveConnection(
  flags: { url?: string | undefined; adminToken?: string | undefined },
  env: Record<string, string | undefined>,
  cwd: string,
): Promise<Connection> {
  let url = flags.url ?? (env.AGENTIX_URL || undefined);
  let adminToken = flags.adminToken ?? (env.AGENTIX_ADMIN_TOKEN || undefined);
  if (url === undefined || adminToken === undefined) {
    const saved = await readCredentials(cwd);
    url ??= saved.edgeUrl;
    adminToken ??= saved.adminToken;
  }
  if (url === undefined) {
    throw new UsageError(`No edge URL: pass --url, set AGENTIX_URL, or start the local stack (it writes ${CREDENTIALS_PATH}).`);
  }
  if (adminToken === undefined) {
    throw new UsageError(
      `No admin token: pass --admin-token, set AGENTIX_ADMIN_TOKEN, or start the local stack (it writes ${CREDENTIALS_PATH}).`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`Invalid edge URL: ${url}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw new UsageError(`Edge URL must be http(s): ${url}`);
  return { baseUrl: url.replace(/\/+$/, ""), adminToken };
}
