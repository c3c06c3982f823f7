import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { EDGE_DEV_SPEC_ENV, type EdgeDevSpec, edgeDevServerEntry } from "./edge-dev-spec.js";
import { tsxLoader } from "./tsx-loader.js";

/*
 * Runs wrangler's CLI to completion, and the edge's dev server (wrangler's API) as a
 * child process group, so stopping it also stops the workerd processes it starts (no
 * orphans after Ctrl-C).
 */

const wranglerBin = createRequire(import.meta.url).resolve("wrangler/bin/wrangler.js");

export interface WranglerRunOptions {
  cwd: string;
  /** Extra environment for wrangler (merged over process.env). */
  env?: Record<string, string>;
  onOutput?: (line: string) => void;
}

function wranglerEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    WRANGLER_SEND_METRICS: "false",
    // No interactive prompts or update checks: this machine has no internet.
    WRANGLER_HIDE_BANNER: "true",
    NO_UPDATE_NOTIFIER: "1",
    ...extra,
  };
}

/** Passes the child's output lines to onOutput; without one, reads and drops them. */
export function forwardLines(child: ChildProcess, onOutput?: (line: string) => void): void {
  if (!onOutput) {
    // Read and drop. A pipe nobody reads fills up (a few hundred kB of warnings, e.g. a
    // burst of logged errors); wrangler then blocks in a synchronous write to it, stops
    // reading workerd's output, workerd blocks writing its console.error, and the whole
    // edge stops answering, /health included.
    child.stdout?.resume();
    child.stderr?.resume();
    return;
  }
  for (const stream of [child.stdout, child.stderr]) {
    let buffer = "";
    stream?.setEncoding("utf8");
    stream?.on("data", (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split("\n");
      buffer = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) onOutput(line);
    });
  }
}

/** Runs a wrangler command to completion; rejects with its output on failure. */
export function runWrangler(args: string[], options: WranglerRunOptions): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [wranglerBin, ...args], {
      cwd: options.cwd,
      env: wranglerEnv(options.env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      if (code === 0) resolve(output);
      else reject(new Error(`wrangler ${args.join(" ")} exited with ${code}:\n${output}`));
    });
  });
}

export interface LongRunningProcess {
  readonly pid: number;
  /** Resolves when the process group is gone. */
  stop(): Promise<void>;
  readonly exited: Promise<number | null>;
}

/** Starts the edge Worker on wrangler's local dev server (edge-dev-server.ts, TypeScript: through tsx) in its own process group. */
export function startEdgeDevServer(spec: EdgeDevSpec, options: WranglerRunOptions): LongRunningProcess {
  return startProcessGroup(["--import", tsxLoader, edgeDevServerEntry], {
    ...options,
    env: { ...options.env, [EDGE_DEV_SPEC_ENV]: JSON.stringify(spec) },
  });
}

/** Starts a long-running Node script (`node ...argv`) in its own process group. */
function startProcessGroup(argv: string[], options: WranglerRunOptions): LongRunningProcess {
  const child = spawn(process.execPath, argv, {
    cwd: options.cwd,
    env: wranglerEnv(options.env),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  forwardLines(child, options.onOutput);
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start node ${argv.join(" ")}`);
  const signalGroup = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  };
  // If this process dies without stop(), take the group with it.
  const onExit = (): void => signalGroup("SIGKILL");
  process.on("exit", onExit);
  return {
    pid,
    exited,
    async stop() {
      process.off("exit", onExit);
      signalGroup("SIGTERM");
      const killTimer = setTimeout(() => signalGroup("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killTimer);
      // workerd may outlive wrangler for a moment; make sure the group is gone.
      signalGroup("SIGKILL");
    },
  };
}
