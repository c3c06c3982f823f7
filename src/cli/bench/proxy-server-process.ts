import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { z } from "zod";
import { POOL_NODE_FLAGS } from "../../pool/node-flags.js";
import { GC_TOTALS_REQUEST, type GcTotals } from "./gc-meter.js";
import { tsxLoader } from "../tsx-loader.js";
import { commandOnCpus } from "./placement.js";
import {
  ChildMessage,
  GcTotalsReply,
  EdgeStackReady,
  type EdgeStackServerSpec,
  EngineReady,
  type EngineServerSpec,
  type NodeProxyServerSpec,
  PoolReady,
  type PoolServerSpec,
  type RelaySourceServerSpec,
  type ServerSpec,
  STOP_MESSAGE,
} from "./proxy-server-spec.js";

/*
 * Starts proxy-server-child.ts in its own Node process (TypeScript through tsx's
 * loader) and waits for its "ready" report. Stopping asks it to close cleanly and
 * kills it only if it does not exit in time. If this process ends without stopping
 * it, an exit hook sends SIGTERM, and the child also stops when its IPC channel closes.
 */

export interface ServerProcess<Ready> {
  ready: Ready;
  pid: number;
  /** Its garbage collector's pauses so far (gc-meter.ts); undefined when it does not answer within a second. */
  gcTotals(): Promise<GcTotals | undefined>;
  /** Resolves once the process has exited. */
  stop(): Promise<void>;
}

const childScript = fileURLToPath(new URL("./proxy-server-child.ts", import.meta.url));
const CHILD_IN_TREE = "src/cli/bench/proxy-server-child.ts";
const POOL_FLAGS_IN_TREE = "src/pool/node-flags.ts";
/** This tree's GC meter, loaded into every server process (a baseline tree's too). */
const gcMeterPreload = new URL("./gc-meter-preload.ts", import.meta.url).href;
const GC_TOTALS_WAIT_MS = 1_000;
const OUTPUT_TAIL_LINES = 40;

/** Keeps the last lines a child printed, for the error when it fails. */
function tailOf(child: ChildProcess, onLine?: (line: string) => void): () => string {
  const lines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    stream?.setEncoding("utf8");
    stream?.on("data", (chunk: string) => {
      for (const line of chunk.split("\n")) {
        if (!line.trim()) continue;
        onLine?.(line);
        lines.push(line);
        if (lines.length > OUTPUT_TAIL_LINES) lines.shift();
      }
    });
  }
  return () => lines.join("\n");
}

export interface StartProcessOptions {
  /** Longest wait for "ready". */
  startTimeoutMs?: number;
  /** Longest wait for a clean exit before SIGKILL. */
  stopTimeoutMs?: number;
  signal?: AbortSignal;
  onOutput?: (line: string) => void;
  /** Writes a V8 CPU profile of the child into this directory when it exits (node --cpu-prof). */
  cpuProfileDir?: string;
  /** The profile's sampling interval, µs (node --cpu-prof-interval; default node's 1,000). */
  cpuProfileIntervalUs?: number;
  /** Another checkout whose proxy-server-child.ts (and so its src/) runs instead of this one's. */
  sourceTree?: string;
  /** The CPUs the child may run on (taskset's list, placement.ts); default: wherever the kernel puts it. */
  cpus?: string | undefined;
}

/** Spawns a child with the given script and args and an IPC channel; resolves on its ready message. */
export function startReportingProcess<Ready>(
  command: { args: string[]; name: string },
  readySchema: z.ZodType<Ready>,
  options: StartProcessOptions = {},
): Promise<ServerProcess<Ready>> {
  const started = commandOnCpus(options.cpus, process.execPath, command.args);
  const child = spawn(started.command, started.args, { stdio: ["ignore", "pipe", "pipe", "ipc"] });
  const pid = child.pid;
  const output = tailOf(child, options.onOutput);
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  // SIGTERM, not SIGKILL: the child then still closes what it started (wrangler's process group).
  const killOnExit = () => child.kill("SIGTERM");
  process.on("exit", killOnExit);
  void exited.then(() => process.off("exit", killOnExit));

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        if (child.connected) child.send(STOP_MESSAGE);
        else child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), options.stopTimeoutMs ?? 15_000);
        await exited;
        clearTimeout(timer);
      }
    })();
    return stopping;
  };

  const gcTotals = () =>
    new Promise<GcTotals | undefined>((resolve) => {
      if (!child.connected) return resolve(undefined);
      const done = (totals: GcTotals | undefined) => {
        clearTimeout(timer);
        child.off("message", onReply);
        resolve(totals);
      };
      const onReply = (raw: unknown) => {
        const reply = GcTotalsReply.safeParse(raw);
        if (reply.success) done(reply.data.totals);
      };
      const timer = setTimeout(() => done(undefined), GC_TOTALS_WAIT_MS);
      child.on("message", onReply);
      // A channel that closed meanwhile answers through the callback, not an 'error' event nobody hears.
      child.send(GC_TOTALS_REQUEST, (error) => {
        if (error) done(undefined);
      });
    });

  return new Promise((resolve, reject) => {
    if (pid === undefined) {
      reject(new Error(`could not start the ${command.name} process`));
      return;
    }
    const fail = (reason: string) => {
      cleanup();
      void stop().then(() => reject(new Error(`${command.name} process: ${reason}\n${output()}`)));
    };
    const onMessage = (raw: unknown) => {
      const message = ChildMessage.safeParse(raw);
      if (!message.success) return;
      if (message.data.type === "failed") return fail(`failed to start: ${message.data.message}`);
      const ready = readySchema.safeParse(message.data.ready);
      if (!ready.success) return fail(`unexpected ready report ${JSON.stringify(message.data.ready)}`);
      cleanup();
      resolve({ ready: ready.data, pid, stop, gcTotals });
    };
    const onExit = (code: number | null, signal: string | null) => fail(`exited (${signal ?? code}) before it was ready`);
    const onAbort = () => {
      cleanup();
      void stop().then(() => reject(options.signal?.reason));
    };
    const timer = setTimeout(() => fail(`not ready within ${options.startTimeoutMs ?? 30_000} ms`), options.startTimeoutMs ?? 30_000);
    function cleanup() {
      clearTimeout(timer);
      child.off("message", onMessage);
      child.off("exit", onExit);
      options.signal?.removeEventListener("abort", onAbort);
    }
    child.on("message", onMessage);
    child.once("exit", onExit);
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The node flags a pool core of this tree, or of `sourceTree`, runs with (its
 * src/pool/node-flags.ts: a tree from before that file has none).
 */
export async function poolNodeFlagsOf(sourceTree: string | undefined): Promise<readonly string[]> {
  if (sourceTree === undefined) return POOL_NODE_FLAGS;
  const file = path.join(sourceTree, POOL_FLAGS_IN_TREE);
  if (!existsSync(file)) return [];
  const flags: unknown = ((await import(pathToFileURL(file).href)) as { POOL_NODE_FLAGS?: unknown }).POOL_NODE_FLAGS;
  if (!Array.isArray(flags) || !flags.every((flag) => typeof flag === "string")) throw new Error(`${file}: POOL_NODE_FLAGS is not a list of strings`);
  return flags;
}

async function startServer<Ready>(spec: ServerSpec, readySchema: z.ZodType<Ready>, options: StartProcessOptions) {
  const nodeFlags = spec.role === "pool" ? await poolNodeFlagsOf(options.sourceTree) : [];
  const interval = options.cpuProfileIntervalUs === undefined ? [] : [`--cpu-prof-interval=${options.cpuProfileIntervalUs}`];
  const profile = options.cpuProfileDir === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`, ...interval];
  return startReportingProcess(
    {
      args: [...nodeFlags, ...profile, "--import", tsxLoader, "--import", gcMeterPreload, options.sourceTree === undefined ? childScript : path.join(options.sourceTree, CHILD_IN_TREE), JSON.stringify(spec)],
      name: spec.role,
    },
    readySchema,
    options,
  );
}

export const startEngineProcess = (spec: z.infer<typeof EngineServerSpec>, options: StartProcessOptions = {}) =>
  startServer(spec, EngineReady, options);

/** The relay benchmark's paced token source; it reports the same ready fields as the engine. */
export const startRelaySourceProcess = (spec: z.infer<typeof RelaySourceServerSpec>, options: StartProcessOptions = {}) =>
  startServer(spec, EngineReady, options);

export const startPoolProcess = (spec: z.infer<typeof PoolServerSpec>, options: StartProcessOptions = {}) =>
  startServer(spec, PoolReady, options);

/** The minimal node:http proxy baseline; it reports its URL like the pool. */
export const startNodeProxyProcess = (spec: z.infer<typeof NodeProxyServerSpec>, options: StartProcessOptions = {}) =>
  startServer(spec, PoolReady, options);

/** The whole local stack (engine + pool + `wrangler dev`): minutes on a cold machine are not expected, ~15 s is. */
export const startEdgeStackProcess = (spec: z.infer<typeof EdgeStackServerSpec>, options: StartProcessOptions = {}) =>
  startServer(spec, EdgeStackReady, { startTimeoutMs: 120_000, stopTimeoutMs: 20_000, ...options });
