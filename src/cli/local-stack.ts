import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { randomToken } from "../protocol/ids.js";
import { SigningKeyId } from "../protocol/signing.js";
import { parsePoolConfig } from "../pool/config.js";
import { type PoolHandle, startPool } from "../pool/server.js";
import { DEFAULT_PROFILE } from "../sim/profiles.js";
import {
  DEFAULT_SIM_MODEL,
  type EngineRequestObserver,
  type SimEngineHandle,
  startSimEngine,
} from "../sim/engine-server.js";
import { waitForHttp } from "./http-wait.js";
import { type LongRunningProcess, runWrangler, startEdgeDevServer } from "./wrangler-process.js";

/*
 * The whole stack on one machine: simulated engines and a pool core in this
 * process, the edge Worker on wrangler's dev server in another (edge-dev-server.ts;
 * local D1 and Durable Objects, persisted in the state directory). Credentials are
 * generated once and kept in the state directory, so the dev key survives restarts
 * with the local D1.
 */

export interface LocalStackOptions {
  /** Project root (where wrangler.toml lives). */
  root: string;
  /** Persisted local D1 / Durable Objects and the dev credentials. */
  stateDir: string;
  edgePort: number;
  /** The first pool's port; the others take the next ones (0: any free port for each). */
  poolPort: number;
  /** Pools, each in its own region with its own engines and signing key (default 2: us-east, eu-west). */
  pools?: number;
  /** Simulated engines per pool. */
  engines: number;
  /** Model time per real time of the simulated engines (1 = real time). */
  timeScale: number;
  /**
   * Engines of each pool that start as prefill engines, the rest decode (disaggregated
   * serving, issue 13); 0 or unset: every engine mixed.
   */
  prefillEngines?: number;
  /** The pools' role controller (pool config roles.controller) for disaggregated pools; default off. */
  roleController?: "off" | "ratio" | "threshold";
  /** Per-engine buffer the pool keeps (calls sent to one engine at once). */
  engineMaxInFlight?: number;
  idleTtlMs?: number;
  /** Sees every generation request reach any engine (tests count concurrency there). */
  engineObserver?: EngineRequestObserver;
  log?: (line: string) => void;
  /** Lines wrangler prints (noisy; default dropped). */
  wranglerLog?: (line: string) => void;
  /** More edge vars (over wrangler.toml's), e.g. bench:edge's COUNT_IO and baseline switch. */
  edgeVars?: Readonly<Record<string, string>>;
}

export const LocalCredentials = z.object({
  adminToken: z.string().min(16),
  signingSecret: z.string().min(16),
  /** The ID both sides know signingSecret by (absent from older files: LOCAL_SIGNING_KEY_ID). */
  signingKeyId: SigningKeyId.optional(),
  /** The other pools' secrets by key ID (the first pool's is signingSecret); generated as pools are added. */
  poolSigningKeys: z.record(SigningKeyId, z.string().min(16)).optional(),
  /** Bearer token of the pool's /metrics, /tao/* and /health detail (absent from older files: generated then). */
  poolOperatorToken: z.string().min(32).optional(),
  tenantId: z.string().optional(),
  devKey: z.string().optional(),
  edgeUrl: z.string().optional(),
});
export type LocalCredentials = z.infer<typeof LocalCredentials>;

/** One local pool: its directory entry, its server and its engines. */
export interface LocalPool {
  /** Its directory ID, `local-<region>`. */
  id: string;
  region: string;
  url: string;
  signingKeyId: string;
  handle: PoolHandle;
  engines: SimEngineHandle[];
  /** Stops the pool and its engines (as a region going down would); idempotent. */
  stop(): Promise<void>;
}

export interface LocalStack {
  edgeUrl: string;
  /** The first pool's URL (every pool's: `pools`). */
  poolUrl: string;
  /** `Authorization: Bearer …` of every pool's operator endpoints. */
  poolOperatorToken: string;
  /** The first pool's engines. */
  engineUrls: string[];
  model: string;
  adminToken: string;
  tenantId: string;
  devKey: string;
  /** The first pool's engines. */
  engines: SimEngineHandle[];
  /** The first pool. */
  pool: PoolHandle;
  pools: LocalPool[];
  stop(): Promise<void>;
}

/** The first local pool's signing key's ID (the edge sends it with every signature). */
const LOCAL_SIGNING_KEY_ID = "local-1";

/** The local pools' regions, in order: `--pools 2` runs the first two. */
export const LOCAL_REGIONS = ["us-east", "eu-west", "ap-southeast", "us-west"] as const;

/** Directory IDs of local pools: a run disables the ones it did not start (from an earlier run with more). */
const LOCAL_POOL_PREFIX = "local-";

export const credentialsPath = (stateDir: string) => path.join(stateDir, "credentials.json");

const newPoolOperatorToken = (): string => `pop_${randomToken(44)}`;

async function loadOrCreateCredentials(stateDir: string): Promise<LocalCredentials & { poolOperatorToken: string }> {
  let credentials: LocalCredentials;
  try {
    credentials = LocalCredentials.parse(JSON.parse(await readFile(credentialsPath(stateDir), "utf8")));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    credentials = { adminToken: `adm_${randomToken(40)}`, signingSecret: randomToken(48), signingKeyId: LOCAL_SIGNING_KEY_ID };
  }
  if (credentials.poolOperatorToken !== undefined) return { ...credentials, poolOperatorToken: credentials.poolOperatorToken };
  const withToken = { ...credentials, poolOperatorToken: newPoolOperatorToken() };
  await saveCredentials(stateDir, withToken);
  return withToken;
}

/** Pool i's signing key: the first is the credentials' own, the others `local-<i+1>`, generated once. */
function poolSigningKey(credentials: LocalCredentials, index: number): { id: string; secret: string } {
  if (index === 0) return { id: credentials.signingKeyId ?? LOCAL_SIGNING_KEY_ID, secret: credentials.signingSecret };
  const id = `local-${index + 1}`;
  const keys = (credentials.poolSigningKeys ??= {});
  keys[id] ??= randomToken(48);
  return { id, secret: keys[id] };
}

async function saveCredentials(stateDir: string, credentials: LocalCredentials): Promise<void> {
  await writeFile(credentialsPath(stateDir), `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
}

const TenantView = z.object({ id: z.string() });
const KeyView = z.object({ key: z.string() });

async function adminPost<T>(edgeUrl: string, token: string, route: string, body: unknown, schema: z.ZodType<T>): Promise<T> {
  const res = await fetch(`${edgeUrl}${route}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`POST ${route} answered ${res.status}: ${text}`);
  return schema.parse(JSON.parse(text));
}

async function adminRequest(edgeUrl: string, token: string, method: string, route: string, body?: unknown): Promise<Response> {
  return fetch(`${edgeUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const PoolList = z.object({ data: z.array(z.object({ id: z.string(), status: z.string() })) });

/**
 * Puts this run's pools in the directory (added, or updated: their ports may have
 * changed since the last run) and disables local pools of earlier runs it did not start.
 */
async function registerPools(edgeUrl: string, token: string, pools: readonly LocalPool[], model: string): Promise<void> {
  for (const pool of pools) {
    const fields = { region: pool.region, url: pool.url, models: [model], signing_key_id: pool.signingKeyId, status: "active" };
    let res = await adminRequest(edgeUrl, token, "POST", "/admin/pools", { id: pool.id, ...fields });
    if (res.status === 409) res = await adminRequest(edgeUrl, token, "PATCH", `/admin/pools/${pool.id}`, fields);
    const text = await res.text();
    if (!res.ok) throw new Error(`registering pool ${pool.id} answered ${res.status}: ${text}`);
  }
  const listed = await adminRequest(edgeUrl, token, "GET", "/admin/pools");
  const started = new Set(pools.map((pool) => pool.id));
  for (const stale of PoolList.parse(await listed.json()).data) {
    if (!stale.id.startsWith(LOCAL_POOL_PREFIX) || started.has(stale.id) || stale.status === "disabled") continue;
    const res = await adminRequest(edgeUrl, token, "POST", `/admin/pools/${stale.id}/disable`);
    await res.body?.cancel();
  }
}

/** A dev key that still authenticates is kept; otherwise a dev tenant and key are created. */
async function ensureDevTenant(edgeUrl: string, credentials: LocalCredentials): Promise<{ tenantId: string; devKey: string }> {
  if (credentials.devKey && credentials.tenantId) {
    const probe = await fetch(`${edgeUrl}/v1/programs/prog_00000000`, {
      headers: { authorization: `Bearer ${credentials.devKey}` },
    });
    await probe.body?.cancel();
    if (probe.status !== 401) return { tenantId: credentials.tenantId, devKey: credentials.devKey };
  }
  // Pro, not the default free plan, so local benchmarks are not throttled at 60 requests a minute.
  const tenant = await adminPost(edgeUrl, credentials.adminToken, "/admin/tenants", { name: "dev", plan: "pro" }, TenantView);
  const key = await adminPost(
    edgeUrl,
    credentials.adminToken,
    `/admin/tenants/${tenant.id}/keys`,
    { name: "local dev key" },
    KeyView,
  );
  return { tenantId: tenant.id, devKey: key.key };
}

/** Engine `index`'s role in a pool whose first `prefill` engines prefill: mixed when none do. */
function roleOf(index: number, prefill: number): "mixed" | "prefill" | "decode" {
  if (prefill <= 0) return "mixed";
  return index < prefill ? "prefill" : "decode";
}

/** One pool in `region` with its own engines and key, listening on `port` (0: any). */
async function startLocalPool(
  options: LocalStackOptions,
  region: string,
  port: number,
  signingKey: { id: string; secret: string },
  operatorToken: string,
): Promise<LocalPool> {
  const id = `${LOCAL_POOL_PREFIX}${region}`;
  const engines: SimEngineHandle[] = [];
  let handle: PoolHandle | undefined;
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      await handle?.close();
      await Promise.all(engines.map((engine) => engine.close()));
    })());
  try {
    for (let i = 0; i < options.engines; i++) {
      engines.push(
        await startSimEngine({
          engineId: `${region}-sim-${i + 1}`,
          timeScale: options.timeScale,
          ...(options.engineObserver ? { requestObserver: options.engineObserver } : {}),
        }),
      );
    }
    handle = await startPool(
      parsePoolConfig({
        port,
        signingKeys: [signingKey],
        operatorToken,
        // Tenants may name only the model the simulated engines serve (no other model or adapter passes through).
        models: [DEFAULT_SIM_MODEL],
        engines: engines.map((e, i) => ({
          id: e.engineId,
          url: e.url,
          kind: "vllm",
          role: roleOf(i, options.prefillEngines ?? 0),
          maxInFlight: options.engineMaxInFlight ?? 8,
          // The simulated engines run the default profile: admission projects their KV and step time from it.
          profile: DEFAULT_PROFILE,
          // They serve Messages and Responses as vLLM does: those calls go in their own API (pool tests cover the translated path).
          nativeApis: ["messages", "responses"],
          // They take Agentix's KV retention hints (context tags, keep / normal / drop): stock engines do not.
          retentionHints: "agentix",
        })),
        ...((options.prefillEngines ?? 0) > 0 ? { roles: { controller: options.roleController ?? "off" } } : {}),
      }),
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { id, region, url: handle.url, signingKeyId: signingKey.id, handle, engines, stop };
}

export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const log = options.log ?? (() => {});
  const poolCount = options.pools ?? 2;
  const prefill = options.prefillEngines ?? 0;
  if (prefill === 0 && (options.roleController ?? "off") !== "off") throw new Error("a role controller moves engines between prefill and decode: start the pools with prefill engines (--prefill N)");
  if (prefill > 0 && prefill >= options.engines) throw new Error(`${prefill} prefill engines of ${options.engines} leave none to decode: give fewer prefill engines or more engines`);
  if (!(Number.isInteger(poolCount) && poolCount >= 1 && poolCount <= LOCAL_REGIONS.length)) {
    throw new RangeError(`pools must be a whole number from 1 to ${LOCAL_REGIONS.length}, got ${poolCount}`);
  }
  await mkdir(options.stateDir, { recursive: true });
  const credentials = await loadOrCreateCredentials(options.stateDir);
  const signingKeys = LOCAL_REGIONS.slice(0, poolCount).map((_, i) => poolSigningKey(credentials, i));
  await saveCredentials(options.stateDir, credentials);
  const persistDir = path.join(options.stateDir, "wrangler");

  const pools: LocalPool[] = [];
  let edge: LongRunningProcess | undefined;
  const stop = async () => {
    await edge?.stop();
    await Promise.all(pools.map((pool) => pool.stop()));
  };

  try {
    for (const [i, region] of LOCAL_REGIONS.slice(0, poolCount).entries()) {
      const port = options.poolPort === 0 ? 0 : options.poolPort + i;
      const pool = await startLocalPool(options, region, port, signingKeys[i]!, credentials.poolOperatorToken);
      pools.push(pool);
      log(`pool ${pool.id} (${region}): ${pool.url}; engines ${pool.engines.map((e) => `${e.engineId} ${e.url}`).join(", ")}`);
    }

    await runWrangler(["d1", "migrations", "apply", "agentix", "--local", "--persist-to", persistDir], {
      cwd: options.root,
      env: { CI: "true" },
    });
    log("local D1 migrations applied");

    const vars = {
      // The edge signs each pool's requests with the key its directory row names.
      POOL_SIGNING_KEYS: JSON.stringify(Object.fromEntries(signingKeys.map((key) => [key.id, key.secret]))),
      ADMIN_TOKEN: credentials.adminToken,
      ...(options.idleTtlMs ? { PROGRAM_IDLE_TTL_MS: String(options.idleTtlMs) } : {}),
      ...options.edgeVars,
    };
    edge = startEdgeDevServer(
      { config: path.join(options.root, "wrangler.toml"), host: "127.0.0.1", port: options.edgePort, persistDir, vars, logLevel: "warn" },
      { cwd: options.root, onOutput: options.wranglerLog },
    );
    const edgeUrl = `http://127.0.0.1:${options.edgePort}`;
    let edgeAlive = true;
    void edge.exited.then(() => (edgeAlive = false));
    await waitForHttp(`${edgeUrl}/health`, 60_000, () => edgeAlive);
    log(`edge: ${edgeUrl}`);

    await registerPools(edgeUrl, credentials.adminToken, pools, DEFAULT_SIM_MODEL);
    log(`pool directory: ${pools.map((pool) => `${pool.id} ${pool.url}`).join(", ")}`);
    const dev = await ensureDevTenant(edgeUrl, credentials);
    await saveCredentials(options.stateDir, { ...credentials, ...dev, edgeUrl });

    const first = pools[0]!;
    return {
      edgeUrl,
      poolUrl: first.url,
      poolOperatorToken: credentials.poolOperatorToken,
      engineUrls: first.engines.map((e) => e.url),
      model: DEFAULT_SIM_MODEL,
      adminToken: credentials.adminToken,
      tenantId: dev.tenantId,
      devKey: dev.devKey,
      engines: first.engines,
      pool: first.handle,
      pools,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
