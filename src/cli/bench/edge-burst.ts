#!/usr/bin/env node
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { Agent, fetch } from "undici";
import { z } from "zod";
import { freePort } from "../free-port.js";
import { DEFAULT_SIM_MODEL } from "../../sim/engine-server.js";
import { credentialsPath, LocalCredentials, type LocalStack, startLocalStack } from "../local-stack.js";

/*
 * Bursts of concurrent chat completions through the edge under `wrangler dev`:
 * the share of calls the edge answers 502 pool_unreachable, and latency. Bounded:
 * `--calls` in total, `--concurrency` at once, no new call after `--max-seconds`,
 * none waited for past CALL_TIMEOUT_MS, loopback only. Starts its own throwaway local
 * stack, or drives a running one (`--state-dir`, optionally `--edge-url`); either way
 * it lifts the dev tenant's limits, so the limiter answers no 429 first.
 *
 *   npx tsx src/cli/bench/edge-burst.ts --concurrency 200 --calls 1000
 */

const USAGE = `edge-burst [options]   502 share and latency of concurrent calls through the edge

  --concurrency N   calls in flight at once (default 200)
  --calls N         calls in total (default 1000)
  --max-seconds S   stop starting calls after S seconds (default 60)
  --max-tokens N    max_tokens per call (default 8)
  --engines N       simulated engines of the stack started here (default 3)
  --time-scale X    simulated engine speed of the stack started here (default 50)
  --state-dir DIR   drive the running stack of this state directory (\`npm start -- --state-dir DIR\`):
                    its credentials.json gives the edge URL, dev key and admin token; lifts its
                    dev tenant's limits
  --edge-url URL    with --state-dir: send the calls here instead (e.g. workerd's own port
                    behind wrangler's proxy; loopback only)
  --wrangler-log    print wrangler's output`;

interface Options {
  concurrency: number;
  calls: number;
  maxSeconds: number;
  maxTokens: number;
  engines: number;
  timeScale: number;
  stateDir: string | undefined;
  edgeUrl: string | undefined;
  wranglerLog: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      concurrency: { type: "string" },
      calls: { type: "string" },
      "max-seconds": { type: "string" },
      "max-tokens": { type: "string" },
      engines: { type: "string" },
      "time-scale": { type: "string" },
      "state-dir": { type: "string" },
      "edge-url": { type: "string" },
      "wrangler-log": { type: "boolean", default: false },
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const count = (flag: string, raw: string | undefined, fallback: number, max: number) => {
    const value = raw === undefined ? fallback : Number(raw);
    if (!Number.isInteger(value) || value <= 0 || value > max) {
      throw new Error(`--${flag} must be an integer in [1, ${max}], got "${raw}"`);
    }
    return value;
  };
  const edgeUrl = values["edge-url"];
  if (edgeUrl !== undefined) {
    const host = new URL(edgeUrl).hostname;
    if (!["127.0.0.1", "localhost", "[::1]"].includes(host)) throw new Error("--edge-url must be a loopback address");
    if (values["state-dir"] === undefined) throw new Error("--edge-url needs --state-dir");
  }
  const timeScale = values["time-scale"] === undefined ? 50 : Number(values["time-scale"]);
  if (!(timeScale > 0)) throw new Error(`--time-scale must be positive, got "${values["time-scale"]}"`);
  return {
    concurrency: count("concurrency", values.concurrency, 200, 2_000),
    calls: count("calls", values.calls, 1_000, 20_000),
    maxSeconds: count("max-seconds", values["max-seconds"], 60, 600),
    maxTokens: count("max-tokens", values["max-tokens"], 8, 4_096),
    engines: count("engines", values.engines, 3, 16),
    timeScale,
    stateDir: values["state-dir"],
    edgeUrl,
    wranglerLog: values["wrangler-log"] ?? false,
  };
}

const ErrorCode = z.object({ error: z.object({ code: z.string().nullable().optional() }) });

export interface BurstCall {
  ms: number;
  /** HTTP status; 0 when the edge itself could not be reached. */
  status: number;
  /** The OpenAI error code of a non-2xx answer. */
  code: string | undefined;
}

export interface BurstResult {
  calls: BurstCall[];
  wallMs: number;
}

/*
 * What wrangler's ProxyWorker (the process on the dev port, in front of the Worker's
 * own workerd socket) answers when its fetch() to the Worker fails (whatever the
 * cause: the text is misleading, the Worker did not restart). A dev-only hop, most
 * likely with a keep-alive race of its own (kj's client and server idle limits are
 * both 5 s); the call never reached the Worker, so it says nothing about edge → pool.
 */
export const WRANGLER_PROXY_LOST = "Your worker restarted mid-request.";

/** A few bodies of non-2xx answers that were not OpenAI errors (e.g. from wrangler's proxy). */
export const unparsedSamples = new Set<string>();

/** A call still unanswered after this long is given up (and counted): the run stays bounded in time. */
export const CALL_TIMEOUT_MS = 60_000;

/*
 * A fresh connection per call: the hop under test is edge → pool. With keep-alive the
 * client's own hop into workerd can meet an idle-close race of its own (undici's idle
 * timer has about 1 s of slack over its 4 s, workerd's server closes idle connections
 * after 5 s), seen as client-side ECONNRESET, which would blur the figures.
 */
const noKeepAlive = new Agent({ pipelining: 0, connections: 4_096 });

async function oneCall(edgeUrl: string, key: string, model: string, maxTokens: number, i: number): Promise<BurstCall> {
  const started = performance.now();
  try {
    const res = await fetch(`${edgeUrl}/v1/chat/completions`, {
      dispatcher: noKeepAlive,
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: `burst call ${i}` }], max_tokens: maxTokens }),
    });
    const text = await res.text();
    let code: string | undefined;
    if (!res.ok) {
      try {
        code = ErrorCode.parse(JSON.parse(text)).error.code ?? undefined;
      } catch {
        code = text.startsWith(WRANGLER_PROXY_LOST) ? "wrangler_proxy_lost" : "unparsed";
        if (code === "unparsed" && unparsedSamples.size < 5) unparsedSamples.add(`${res.status} ${text.slice(0, 300)}`);
      }
    }
    return { ms: performance.now() - started, status: res.status, code };
  } catch (error) {
    if (error instanceof DOMException && error.name === "TimeoutError") {
      return { ms: performance.now() - started, status: 0, code: "client_timeout" };
    }
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error;
    const reason = cause instanceof Error ? ((cause as NodeJS.ErrnoException).code ?? cause.message) : String(cause);
    return { ms: performance.now() - started, status: 0, code: `edge_unreachable (${reason})` };
  }
}

/** `calls` calls, at most `concurrency` at once; no new call starts after `maxSeconds`, none lasts past CALL_TIMEOUT_MS. */
export async function burst(
  edgeUrl: string,
  key: string,
  model: string,
  options: Pick<Options, "concurrency" | "calls" | "maxSeconds" | "maxTokens">,
): Promise<BurstResult> {
  const calls: BurstCall[] = [];
  const started = performance.now();
  const deadline = started + options.maxSeconds * 1000;
  let next = 0;
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (next < options.calls && performance.now() < deadline) {
        const i = next++;
        calls.push(await oneCall(edgeUrl, key, model, options.maxTokens, i));
      }
    }),
  );
  return { calls, wallMs: performance.now() - started };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;

export function summarize(result: BurstResult): string {
  const { calls } = result;
  const ok = calls.filter((c) => c.status === 200).map((c) => c.ms).sort((a, b) => a - b);
  const all = calls.map((c) => c.ms).sort((a, b) => a - b);
  const unreachable = calls.filter((c) => c.code === "pool_unreachable").length;
  const outcomes = new Map<string, number>();
  for (const c of calls) {
    const key = c.status === 200 ? "200" : `${c.status} ${c.code ?? ""}`.trim();
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
  }
  const share = calls.length === 0 ? 0 : (100 * unreachable) / calls.length;
  return [
    `calls ${calls.length} in ${(result.wallMs / 1000).toFixed(1)} s (${((1000 * calls.length) / result.wallMs).toFixed(0)}/s)`,
    `pool_unreachable ${unreachable} (${share.toFixed(2)} %)`,
    `outcomes ${[...outcomes].map(([k, n]) => `${n}×${k}`).join(", ")}`,
    `latency ok p50 ${percentile(ok, 0.5).toFixed(0)} ms p99 ${percentile(ok, 0.99).toFixed(0)} ms; ` +
      `all p50 ${percentile(all, 0.5).toFixed(0)} ms p99 ${percentile(all, 0.99).toFixed(0)} ms`,
  ].join("\n");
}

/** Lifts the dev tenant's limits, so the limiter does not answer 429 before the pool is even asked. */
export async function liftDevLimits(stack: Pick<LocalStack, "edgeUrl" | "tenantId" | "adminToken">): Promise<void> {
  const res = await fetch(`${stack.edgeUrl}/admin/tenants/${stack.tenantId}/overrides`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${stack.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify({ rpm: 1_000_000, tpm: 1_000_000_000, max_concurrent: 10_000, max_active_programs: 10_000_000 }),
  });
  if (!res.ok) throw new Error(`lifting the dev tenant's limits answered ${res.status}: ${await res.text()}`);
}

async function main(options: Options): Promise<void> {
  if (options.stateDir !== undefined) {
    const credentials = LocalCredentials.parse(JSON.parse(await readFile(credentialsPath(options.stateDir), "utf8")));
    const { edgeUrl, devKey, tenantId, adminToken } = credentials;
    if (!edgeUrl || !devKey || !tenantId) throw new Error(`no running stack's credentials in ${options.stateDir}`);
    await liftDevLimits({ edgeUrl, tenantId, adminToken });
    const target = options.edgeUrl ?? edgeUrl;
    console.log(`${options.concurrency} concurrent to ${target}, max_tokens ${options.maxTokens}`);
    console.log(summarize(await burst(target, devKey, DEFAULT_SIM_MODEL, options)));
    for (const sample of unparsedSamples) console.log(`unparsed: ${sample}`);
    return;
  }
  const stateDir = await mkdtemp(path.join(tmpdir(), "agentix-edge-burst-"));
  let lost = 0;
  let stack: LocalStack | undefined;
  try {
    stack = await startLocalStack({
      root: path.resolve(import.meta.dirname, "../../.."),
      stateDir,
      edgePort: await freePort(),
      poolPort: await freePort(),
      // One pool: the bench measures the edge in front of it.
      pools: 1,
      engines: options.engines,
      timeScale: options.timeScale,
      engineMaxInFlight: 32,
      wranglerLog: (line) => {
        if (/connection lost|pool unreachable/i.test(line)) lost++;
        if (options.wranglerLog) console.log(`[wrangler] ${line}`);
      },
    });
    await liftDevLimits(stack);
    console.log(`edge ${stack.edgeUrl} pool ${stack.poolUrl}`);
    // Warm-up: a few calls one at a time, so the first burst does not also measure cold starts.
    for (let i = 0; i < 5; i++) await oneCall(stack.edgeUrl, stack.devKey, stack.model, options.maxTokens, -i);
    const result = await burst(stack.edgeUrl, stack.devKey, stack.model, options);
    console.log(`${options.concurrency} concurrent, max_tokens ${options.maxTokens}, time scale ${options.timeScale}`);
    console.log(summarize(result));
    for (const sample of unparsedSamples) console.log(`unparsed: ${sample}`);
    console.log(`wrangler log lines about an unreachable pool or lost connection: ${lost}`);
  } finally {
    await stack?.stop();
    await rm(stateDir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(parseOptions(process.argv.slice(2))).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
