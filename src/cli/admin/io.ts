/** What `agentix admin` needs from its surroundings; main.ts passes the process's, tests their own. */
export interface AdminIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** Read for AGENTIX_URL and AGENTIX_ADMIN_TOKEN. */
  env: Record<string, string | undefined>;
  /** Where `.agentix/credentials.json` is looked for, and `--out` paths are resolved from. */
  cwd: string;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
}
