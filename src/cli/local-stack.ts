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
import { type LongRunningWrangler, runWrangler, startWrangler } from "./wrangler-process.js";

/*
 * The whole stack on one machine: simulated engines and a pool core in this
 * process, the edge Worker under `wrangler dev` (local D1 and Durable Objects,
 * persisted in the state directory). Credentials are generated once and kept in
 * the state directory, so the dev key survives restarts with the local D1.
 */

export interface LocalStackOptions {
  /** Project root (where wrangler.toml lives). */
  root: string;
  /** Persisted local D1 / Durable Objects and the dev credentials. */
  stateDir: string;
  edgePort: number;
  poolPort: number;
  engines: number;
  /** Model time per real time of the simulated engines (1 = real time). */
  timeScale: number;
  /** Per-engine buffer the pool keeps (calls sent to one engine at once). */
  engineMaxInFlight?: number;
  idleTtlMs?: number;
  /** Sees every generation request reach any engine (tests count concurrency there). */
  engineObserver?: EngineRequestObserver;
  log?: (line: string) => void;
  /** Lines wrangler prints (noisy; default dropped). */
  wranglerLog?: (line: string) => void;
}

export const LocalCredentials = z.object({
  adminToken: z.string().min(16),
  signingSecret: z.string().min(16),
  /** The ID both sides know signingSecret by (absent from older files: LOCAL_SIGNING_KEY_ID). */
  signingKeyId: SigningKeyId.optional(),
  /** Bearer token of the pool's /metrics, /tao/* and /health detail (absent from older files: generated then). */
  poolOperatorToken: z.string().min(32).optional(),
  tenantId: z.string().optional(),
  devKey: z.string().optional(),
  edgeUrl: z.string().optional(),
});
export type LocalCredentials = z.infer<typeof LocalCredentials>;

export interface LocalStack {
  edgeUrl: string;
  poolUrl: string;
  /** `Authorization: Bearer …` of the pool's operator endpoints. */
  poolOperatorToken: string;
  engineUrls: string[];
  model: string;
  adminToken: string;
  tenantId: string;
  devKey: string;
  engines: SimEngineHandle[];
  pool: PoolHandle;
  stop(): Promise<void>;
}

/** The local pool's one signing key's ID (the edge sends it with every signature). */
const LOCAL_SIGNING_KEY_ID = "local-1";

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

export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const log = options.log ?? (() => {});
  await mkdir(options.stateDir, { recursive: true });
  const credentials = await loadOrCreateCredentials(options.stateDir);
  const signingKey = { id: credentials.signingKeyId ?? LOCAL_SIGNING_KEY_ID, secret: credentials.signingSecret };
  const persistDir = path.join(options.stateDir, "wrangler");

  const engines: SimEngineHandle[] = [];
  let pool: PoolHandle | undefined;
  let edge: LongRunningWrangler | undefined;
  const stop = async () => {
    await edge?.stop();
    await pool?.close();
    await Promise.all(engines.map((engine) => engine.close()));
  };

  try {
    for (let i = 0; i < options.engines; i++) {
      engines.push(
        await startSimEngine({
          engineId: `sim-${i + 1}`,
          timeScale: options.timeScale,
          ...(options.engineObserver ? { requestObserver: options.engineObserver } : {}),
        }),
      );
    }
    log(`engines: ${engines.map((e) => `${e.engineId} ${e.url}`).join(", ")}`);

    pool = await startPool(
      parsePoolConfig({
        port: options.poolPort,
        signingKeys: [signingKey],
        operatorToken: credentials.poolOperatorToken,
        // Tenants may name only the model the simulated engines serve (no other model or adapter passes through).
        models: [DEFAULT_SIM_MODEL],
        engines: engines.map((e) => ({
          id: e.engineId,
          url: e.url,
          kind: "vllm",
          maxInFlight: options.engineMaxInFlight ?? 8,
          // The simulated engines run the default profile: admission projects their KV and step time from it.
          profile: DEFAULT_PROFILE,
        })),
      }),
    );
    log(`pool core: ${pool.url}`);

    await runWrangler(["d1", "migrations", "apply", "agentix", "--local", "--persist-to", persistDir], {
      cwd: options.root,
      env: { CI: "true" },
    });
    log("local D1 migrations applied");

    const vars = {
      POOL_URL: pool.url,
      POOL_SIGNING_SECRET: signingKey.secret,
      POOL_SIGNING_KEY_ID: signingKey.id,
      ADMIN_TOKEN: credentials.adminToken,
      ...(options.idleTtlMs ? { PROGRAM_IDLE_TTL_MS: String(options.idleTtlMs) } : {}),
    };
    edge = startWrangler(
      [
        "dev",
        "--ip",
        "127.0.0.1",
        "--port",
        String(options.edgePort),
        "--persist-to",
        persistDir,
        "--inspector-port",
        "0",
        "--show-interactive-dev-session=false",
        "--log-level",
        "warn",
        ...Object.entries(vars).flatMap(([name, value]) => ["--var", `${name}:${value}`]),
      ],
      { cwd: options.root, onOutput: options.wranglerLog },
    );
    const edgeUrl = `http://127.0.0.1:${options.edgePort}`;
    let edgeAlive = true;
    void edge.exited.then(() => (edgeAlive = false));
    await waitForHttp(`${edgeUrl}/health`, 60_000, () => edgeAlive);
    log(`edge: ${edgeUrl}`);

    const dev = await ensureDevTenant(edgeUrl, credentials);
    await saveCredentials(options.stateDir, { ...credentials, ...dev, edgeUrl });

    return {
      edgeUrl,
      poolUrl: pool.url,
      poolOperatorToken: credentials.poolOperatorToken,
      engineUrls: engines.map((e) => e.url),
      model: DEFAULT_SIM_MODEL,
      adminToken: credentials.adminToken,
      tenantId: dev.tenantId,
      devKey: dev.devKey,
      engines,
      pool,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}
