import type { GcTotals } from "./gc-meter.js";
import { Header } from "../../protocol/headers.js";
import { newProgramId, newTenantId, randomToken } from "../../protocol/ids.js";
import { POOL_PATHS, type SigningKey } from "../../protocol/signing.js";
import type { ConnectionSession } from "./proxy-load.js";
import type { ProxyTargetName } from "./proxy-options.js";
import { type PortkeyGateway, PORTKEY_VERSION } from "./proxy-portkey.js";
import type { EdgeStackReady, EngineReady } from "./proxy-server-spec.js";
import { SignedRequestStock } from "./proxy-signed-requests.js";

/*
 * The five ways a chat call reaches the same zero-time engine, as the load
 * generator sees them: a URL, fixed headers, and per-connection request state
 * (signed edge headers for the bare pool, the program ID for the edge).
 */

export const CHAT_PATH = "/v1/chat/completions";

export interface RunPreparation {
  /** A session per connection. */
  session: () => ConnectionSession;
  /** Requests that could not be prepared (e.g. signatures ran out); each is an error. */
  shortfall(): number;
}

export interface RunSizing {
  body: string;
  connections: number;
  durationSeconds: number;
  /** Upper estimate of this run's requests per second. */
  expectedRps: number;
}

export interface BenchTarget {
  name: ProxyTargetName;
  label: string;
  description: string;
  /** URL of the chat-completions endpoint. */
  url: string;
  /** Headers every request carries. */
  headers: Record<string, string>;
  /** The engine behind this target (to check a call reached it). */
  engineUrl: string;
  /** The process whose CPU time a call of this target costs (the proxy's own; the engine's for the engine), when known. */
  cpuPid?: number;
  /** That process's GC pauses so far (gc-meter.ts), when it is one the bench started. */
  gcTotals?: () => Promise<GcTotals | undefined>;
  prepareRun(sizing: RunSizing): Promise<RunPreparation>;
}

export const TARGET_LABELS: Record<ProxyTargetName, string> = {
  engine: "(a) engine",
  "node-proxy": "(n) node proxy",
  "pool-baseline": "(b0) pool before",
  pool: "(b) pool",
  portkey: "(c) portkey",
  edge: "(d) edge",
};

const JSON_HEADERS = { "content-type": "application/json" };
const noState = (): ConnectionSession => ({ headers: () => ({}) });
const unprepared: RunPreparation = { session: noState, shortfall: () => 0 };

export function engineTarget(engine: EngineReady): BenchTarget {
  return {
    name: "engine",
    label: TARGET_LABELS.engine,
    description: "simulated vLLM engine, direct",
    url: `${engine.url}${CHAT_PATH}`,
    headers: JSON_HEADERS,
    engineUrl: engine.url,
    prepareRun: async () => unprepared,
  };
}

/** A minimal node:http proxy in front of the engine: the cost of any Node hop, nothing else. */
export function nodeProxyTarget(proxy: { url: string }, engineUrl: string): BenchTarget {
  return {
    name: "node-proxy",
    label: TARGET_LABELS["node-proxy"],
    description: "minimal node:http proxy (keep-alive agent, pipes both ways) → engine",
    url: `${proxy.url}${CHAT_PATH}`,
    headers: JSON_HEADERS,
    engineUrl,
    prepareRun: async () => unprepared,
  };
}

/** Signatures for the bare pool: enough for 1.5× the expected rate, made before the run. */
export function presignCount(sizing: Pick<RunSizing, "connections" | "durationSeconds" | "expectedRps">): number {
  if (!(sizing.expectedRps > 0) || !(sizing.durationSeconds > 0)) throw new RangeError("presigning needs a positive rate and duration");
  // One second more than the duration: room for warm connections and the stop tick.
  const estimate = Math.ceil(sizing.expectedRps * (sizing.durationSeconds + 1) * 1.5) + 2 * sizing.connections + 100;
  return Math.min(estimate, 1_000_000);
}

export function poolTarget(pool: { url: string }, engineUrl: string, signingKey: SigningKey, name: "pool" | "pool-baseline" = "pool"): BenchTarget {
  const tenant = newTenantId();
  return {
    name,
    label: TARGET_LABELS[name],
    description: `pool core${name === "pool-baseline" ? " of the baseline tree" : ""} → engine, calls signed as the edge signs them`,
    url: `${pool.url}${POOL_PATHS.chatCompletions}`,
    headers: JSON_HEADERS,
    engineUrl,
    async prepareRun(sizing) {
      // One program per connection, like the edge run (where each connection is one agent).
      const programs = Array.from({ length: sizing.connections }, newProgramId);
      const stock = new SignedRequestStock(signingKey, sizing.body, { tenant, programs, thread: "main" });
      await stock.fill(presignCount(sizing));
      return { session: () => ({ headers: () => stock.take() }), shortfall: () => stock.exhausted };
    },
  };
}

export function portkeyTarget(gateway: PortkeyGateway, engineUrl: string): BenchTarget {
  return {
    name: "portkey",
    label: TARGET_LABELS.portkey,
    description: `Portkey gateway ${PORTKEY_VERSION} → engine`,
    url: `${gateway.url}${CHAT_PATH}`,
    // The gateway passes Authorization through; the engine ignores it.
    headers: { ...JSON_HEADERS, authorization: `Bearer sk-bench-${randomToken(8)}`, ...gateway.routeHeaders(`${engineUrl}/v1`) },
    engineUrl,
    prepareRun: async () => unprepared,
  };
}

function headerValue(headers: Record<string, string | string[]>, name: string): string | undefined {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value[0] : value;
  }
  return undefined;
}

/** Each connection is one sequential agent program: its first call creates the program, the rest reuse it. */
function programSession(): ConnectionSession {
  let program: string | undefined;
  return {
    headers: (): Record<string, string> => (program ? { [Header.program]: program } : {}),
    onResponse(status, headers) {
      if (program === undefined && status >= 200 && status < 300) program = headerValue(headers, Header.program);
    },
  };
}

export function edgeTarget(stack: EdgeStackReady): BenchTarget {
  return {
    name: "edge",
    label: TARGET_LABELS.edge,
    description: "edge Worker under wrangler dev (local workerd, D1, Durable Objects) → pool → engine",
    url: `${stack.edgeUrl}${CHAT_PATH}`,
    headers: { ...JSON_HEADERS, authorization: `Bearer ${stack.devKey}` },
    engineUrl: stack.engineUrl,
    prepareRun: async () => ({ session: programSession, shortfall: () => 0 }),
  };
}
