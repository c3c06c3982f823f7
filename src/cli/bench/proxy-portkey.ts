import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { waitForHttp } from "../http-wait.js";
import { freePort } from "../free-port.js";
import { commandOnCpus } from "./placement.js";

/*
 * Portkey's open-source AI gateway (@portkey-ai/gateway, a dev dependency) as a
 * child process, the peer proxy of the comparison. It routes by headers: provider
 * "openai" with a custom host sends the call to our engine's /v1.
 */

const require = createRequire(import.meta.url);
const packageJson = require.resolve("@portkey-ai/gateway/package.json");
const startScript = path.join(path.dirname(packageJson), "build", "start-server.js");

export const PORTKEY_VERSION = (JSON.parse(readFileSync(packageJson, "utf8")) as { version: string }).version;

/*
 * Gateway 1.15.2 bundles @hono/node-server 1.19, whose Response wrapper keeps the
 * *immutable* headers of a fetch() response; the gateway then appends its
 * x-portkey-* headers to them and every streaming call fails with "TypeError:
 * immutable" (Portkey-AI/gateway issues #1389 and #1550). Preloaded into the
 * gateway's process, this hands it fetch() responses with mutable copies of the
 * headers, which is what the upstream fix (PR #1551) does inside the gateway: one
 * extra Response object per upstream call.
 */
const MUTABLE_FETCH_HEADERS_PRELOAD = `
const NativeResponse = globalThis.Response;
const nativeFetch = globalThis.fetch;
const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);
globalThis.fetch = async (...args) => {
  const response = await nativeFetch(...args);
  return new NativeResponse(NULL_BODY_STATUS.has(response.status) ? null : response.body, {
    status: response.status,
    statusText: response.statusText,
    headers: new Headers(response.headers),
  });
};
`;
const preloadUrl = `data:text/javascript,${encodeURIComponent(MUTABLE_FETCH_HEADERS_PRELOAD)}`;

export interface PortkeyGateway {
  url: string;
  pid: number;
  /** Headers that route a chat call to an OpenAI-compatible server at `baseUrl` (ending in /v1). */
  routeHeaders(baseUrl: string): Record<string, string>;
  stop(): Promise<void>;
}

export async function startPortkeyGateway(options: { signal?: AbortSignal; cpus?: string | undefined } = {}): Promise<PortkeyGateway> {
  const port = await freePort();
  const started = commandOnCpus(options.cpus, process.execPath, ["--import", preloadUrl, startScript, `--port=${port}`, "--headless"]);
  const child = spawn(started.command, started.args, { stdio: ["ignore", "pipe", "pipe"] });
  const pid = child.pid;
  if (pid === undefined) throw new Error("could not start the Portkey gateway");
  let output = "";
  const keepTail = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout.on("data", keepTail);
  child.stderr.on("data", keepTail);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  let alive = true;
  void exited.then(() => (alive = false));
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      if (alive) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5_000);
        await exited;
        clearTimeout(timer);
      }
      process.off("exit", killOnExit);
    })();
    return stopping;
  };

  const url = `http://127.0.0.1:${port}`;
  try {
    options.signal?.throwIfAborted();
    await waitForHttp(`${url}/`, 30_000, () => alive && !options.signal?.aborted);
  } catch (error) {
    await stop();
    throw new Error(`Portkey gateway did not start: ${error instanceof Error ? error.message : String(error)}\n${output}`);
  }
  return {
    url,
    pid,
    routeHeaders: (baseUrl) => ({ "x-portkey-provider": "openai", "x-portkey-custom-host": baseUrl }),
    stop,
  };
}
