import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_DISPATCH_SETTINGS } from "../../src/core/settings.js";
import { loadPoolConfig, parsePoolConfig, PoolConfigError } from "../../src/pool/config.js";

const minimal = { signingSecret: "0123456789abcdef", engines: [{ id: "e1", url: "http://127.0.0.1:8000/" }] };
const KEY_A = { id: "pool-a-2025", secret: "secret-of-key-a-0123" };
const KEY_B = { id: "pool-a-2026", secret: "secret-of-key-b-4567" };

describe("pool config", () => {
  it("reads the legacy signingSecret as one key with id \"default\"", () => {
    const config = parsePoolConfig(minimal);
    expect(config.signingKeys).toEqual([{ id: "default", secret: minimal.signingSecret }]);
    expect(config).not.toHaveProperty("signingSecret");
  });

  it("takes one signing key, or two while rotating", () => {
    expect(parsePoolConfig({ engines: minimal.engines, signingKeys: [KEY_A] }).signingKeys).toEqual([KEY_A]);
    expect(parsePoolConfig({ engines: minimal.engines, signingKeys: [KEY_A, KEY_B] }).signingKeys).toEqual([KEY_A, KEY_B]);
  });

  it("fills defaults from the core and the pool", () => {
    const config = parsePoolConfig(minimal);
    expect(config).toMatchObject({
      host: "127.0.0.1",
      port: 8100,
      timestampWindowMs: 30_000,
      replayWindowMs: 60_000,
      metricsIntervalMs: 500,
      retries: 2,
    });
    expect(config.scheduling).toEqual(DEFAULT_DISPATCH_SETTINGS);
    expect(config.engines[0]).toMatchObject({
      id: "e1",
      url: "http://127.0.0.1:8000",
      kind: "vllm",
      maxInFlight: 64,
      healthPath: "/health",
      metricsPath: "/metrics",
    });
  });

  it("defaults health and metrics paths by engine kind", () => {
    const config = parsePoolConfig({
      ...minimal,
      engines: [
        { id: "o", url: "https://api.example.com", kind: "openai", apiKey: "sk-x", model: "gpt-x" },
        { id: "s", url: "http://10.0.0.2:30000", kind: "sglang", metricsPath: null },
      ],
    });
    expect(config.engines[0]).toMatchObject({ healthPath: "/v1/models", metricsPath: undefined, model: "gpt-x" });
    expect(config.engines[1]).toMatchObject({ healthPath: "/health", metricsPath: undefined });
  });

  it("overrides scheduling settings field by field", () => {
    const config = parsePoolConfig({ ...minimal, scheduling: { queue: { levels: 4 }, saturation: { maxKvUsage: 0.9 } } });
    expect(config.scheduling.queue).toEqual({ ...DEFAULT_DISPATCH_SETTINGS.queue, levels: 4 });
    expect(config.scheduling.saturation.maxKvUsage).toBe(0.9);
    expect(config.scheduling.routing).toEqual(DEFAULT_DISPATCH_SETTINGS.routing);
    // A call's service is its standalone engine work unless the operator asks for wall time.
    expect(config.scheduling.service).toBe("work");
    expect(parsePoolConfig({ ...minimal, scheduling: { service: "wall" } }).scheduling.service).toBe("wall");
  });

  it("configures admission, an engine's decode cost by profile or terms, and routing baselines", () => {
    const config = parsePoolConfig({
      ...minimal,
      engines: [
        { id: "h", url: "http://h", profile: "llama-3.1-8b-h100" },
        { id: "c", url: "http://c", decodeCost: { decodeBaseMs: 10, perTokenMs: 0.03, perContextTokenMs: 0.0001, perSequenceMs: 0.005 } },
      ],
      scheduling: { admission: { kvTarget: 0.8, stepTargetMs: 50 }, routing: { policy: "round-robin" } },
    });
    // A named profile states the decode terms and the KV capacity (26,300 blocks of 16).
    expect(config.engines[0]).toMatchObject({ decodeCost: { decodeBaseMs: 7 }, kvCapacityTokens: 420_800 });
    expect(config.engines[1]).toMatchObject({ decodeCost: { decodeBaseMs: 10 } });
    expect(config.engines[1]?.kvCapacityTokens).toBeUndefined();
    expect(config.scheduling.admission).toEqual({ ...DEFAULT_DISPATCH_SETTINGS.admission, kvTarget: 0.8, stepTargetMs: 50 });
    expect(config.scheduling.routing.policy).toBe("round-robin");
    expect(parsePoolConfig({ ...minimal, scheduling: { admission: { enabled: false } } }).scheduling.admission).toBeUndefined();
  });

  it("sets the routing's affinity-turnover rule, or turns it off with null", () => {
    expect(parsePoolConfig({ ...minimal, scheduling: { routing: { affinityTurnover: 0.25 } } }).scheduling.routing.affinityTurnover).toBe(0.25);
    const off = parsePoolConfig({ ...minimal, scheduling: { routing: { affinityTurnover: null } } }).scheduling.routing;
    expect(off).not.toHaveProperty("affinityTurnover");
    expect(off.longPromptTokens).toBe(DEFAULT_DISPATCH_SETTINGS.routing.longPromptTokens);
  });

  it("gives engines the mixed role unless told, and reads a disaggregated pool's roles", () => {
    expect(parsePoolConfig(minimal).engines[0]?.role).toBe("mixed");
    expect(parsePoolConfig(minimal).roles).toEqual({ controller: "off", roundMs: 2_500 });
    const split = parsePoolConfig({
      ...minimal,
      engines: [
        { id: "p", url: "http://x", role: "prefill", profile: "llama-3.1-8b-h100" },
        { id: "d", url: "http://y", role: "decode", profile: "llama-3.1-8b-h100" },
      ],
      roles: { controller: "ratio", roundMs: 5_000 },
    });
    expect(split.engines.map((e) => e.role)).toEqual(["prefill", "decode"]);
    expect(split.roles.controller).toBe("ratio");
  });

  it("caps an engine's decodes at its batch: maxNumSeqs, else an explicit maxInFlight, else its profile's, else the count cap's default", () => {
    const engines = parsePoolConfig({
      ...minimal,
      engines: [
        { id: "a", url: "http://a", profile: "llama-3.1-8b-h100" },
        { id: "b", url: "http://b", profile: "llama-3.1-8b-h100", maxInFlight: 16 },
        { id: "c", url: "http://c", profile: "llama-3.1-8b-h100", maxInFlight: 16, maxNumSeqs: 256 },
        { id: "d", url: "http://d" },
      ],
    }).engines;
    expect(engines.map((e) => [e.maxInFlight, e.maxDecodes])).toEqual([
      [64, 128],
      [16, 16],
      [16, 256],
      [64, 64],
    ]);
    expect(() => parsePoolConfig({ ...minimal, engines: [{ id: "e", url: "http://e", maxNumSeqs: 0 }] })).toThrow(/maxNumSeqs/);
  });

  it("switches a vLLM engine's role with overlap and an SGLang engine's with a drain unless told", () => {
    const pair = (kind: "vllm" | "sglang", roleSwitch?: "drain") => [
      { id: "p", url: "http://x", kind, role: "prefill", ...(roleSwitch === undefined ? {} : { roleSwitch }) },
      { id: "d", url: "http://y", kind, role: "decode" },
    ];
    expect(parsePoolConfig({ ...minimal, engines: pair("vllm") }).engines.map((e) => e.roleSwitch)).toEqual(["overlap", "overlap"]);
    expect(parsePoolConfig({ ...minimal, engines: pair("sglang") }).engines.map((e) => e.roleSwitch)).toEqual(["drain", "drain"]);
    // A vLLM engine started kv_producer or kv_consumer serves one side: it drains.
    expect(parsePoolConfig({ ...minimal, engines: pair("vllm", "drain") }).engines.map((e) => e.roleSwitch)).toEqual(["drain", "overlap"]);
  });

  it.each([
    ["an admission target the core refuses", { ...minimal, scheduling: { admission: { kvTarget: 1.5 } } }, /kvTarget must be/],
    ["an unknown engine profile", { ...minimal, engines: [{ id: "e", url: "http://x", profile: "gpt-5-b200" }] }, /profile: one of/],
    [
      "both a profile and a decode cost",
      {
        ...minimal,
        engines: [
          { id: "e", url: "http://x", profile: "llama-3.1-8b-h100", decodeCost: { decodeBaseMs: 1, perTokenMs: 0, perContextTokenMs: 0, perSequenceMs: 0 } },
        ],
      },
      /not both/,
    ],
    ["no engines", { ...minimal, engines: [] }, /at least one engine/],
    ["duplicate engine ids", { ...minimal, engines: [minimal.engines[0], minimal.engines[0]] }, /unique/],
    ["a non-http url", { ...minimal, engines: [{ id: "e", url: "ftp://x" }] }, /http\(s\) URL/],
    ["an unknown kind", { ...minimal, engines: [{ id: "e", url: "http://x", kind: "tgi" }] }, /kind/],
    ["a short secret", { ...minimal, signingSecret: "short" }, /at least 16/],
    ["a short secret in signingKeys", { engines: minimal.engines, signingKeys: [{ id: "k1", secret: "short" }] }, /must be at least 16 characters\n\s+→ at signingKeys\[0\]\.secret/],
    ["a key id with a space", { engines: minimal.engines, signingKeys: [{ id: "k 1", secret: KEY_A.secret }] }, /key id: 1–64 of letters, digits, \. _ -/],
    ["duplicate signing key ids", { engines: minimal.engines, signingKeys: [KEY_A, { ...KEY_B, id: KEY_A.id }] }, /key ids must be unique/],
    ["three signing keys", { engines: minimal.engines, signingKeys: [KEY_A, KEY_B, { id: "k3", secret: KEY_A.secret }] }, /at most two keys/],
    ["no signing keys", { engines: minimal.engines, signingKeys: [] }, /at least one key/],
    ["both signingSecret and signingKeys", { ...minimal, signingKeys: [KEY_A] }, /signingKeys or the legacy signingSecret, not both/],
    ["neither signingSecret nor signingKeys", { engines: minimal.engines }, /signingKeys \(or the legacy signingSecret\) is required/],
    ["a misspelt key", { ...minimal, retry: 3 }, /retry/],
    ["a scheduling value the core refuses", { ...minimal, scheduling: { queue: { growth: 1 } } }, /growth must be/],
    ["an unknown scheduling knob", { ...minimal, scheduling: { routing: { longPrompt: 5 } } }, /longPrompt/],
    ["an affinity turnover of 0", { ...minimal, scheduling: { routing: { affinityTurnover: 0 } } }, /affinityTurnover must be a finite number > 0/],
    ["an unknown service measure", { ...minimal, scheduling: { service: "cpu" } }, /service/],
    ["a replay window shorter than 2 × the timestamp window", { ...minimal, replayWindowMs: 30_000 }, /replayWindowMs/],
    ["prefill engines without a decode engine", { ...minimal, engines: [{ id: "p", url: "http://x", role: "prefill" }, { id: "m", url: "http://y" }] }, /needs at least one decode engine/],
    ["decode engines alone", { ...minimal, engines: [{ id: "d", url: "http://x", role: "decode" }] }, /prefill or mixed engine to start calls on/],
    ["a split role on an engine that cannot split", { ...minimal, engines: [{ id: "p", url: "http://x", kind: "openai", role: "prefill" }, { id: "d", url: "http://y", role: "decode" }] }, /only vllm and sglang engines can take a prefill or decode role/],
    ["a split across kinds", { ...minimal, engines: [{ id: "p", url: "http://x", role: "prefill" }, { id: "d", url: "http://y", kind: "sglang", role: "decode" }] }, /must be of one kind/],
    ["an unknown role", { ...minimal, engines: [{ id: "p", url: "http://x", role: "encode" }] }, /role/],
    ["an unknown role controller", { ...minimal, roles: { controller: "pid" } }, /controller/],
    [
      "an overlapping switch on an SGLang PD engine",
      { ...minimal, engines: [{ id: "p", url: "http://x", kind: "sglang", role: "prefill", roleSwitch: "overlap" }, { id: "d", url: "http://y", kind: "sglang", role: "decode" }] },
      /side is fixed at start: drain/,
    ],
    ["a role controller without split engines", { ...minimal, roles: { controller: "ratio" } }, /give the pool prefill and decode engines/],
    [
      "a role controller without a cost model",
      { ...minimal, engines: [{ id: "p", url: "http://x", role: "prefill" }, { id: "d", url: "http://y", role: "decode" }], roles: { controller: "threshold" } },
      /profile or a decodeCost/,
    ],
  ])("rejects %s with a clear message", (_what, input, message) => {
    expect(() => parsePoolConfig(input)).toThrow(PoolConfigError);
    expect(() => parsePoolConfig(input)).toThrow(message);
  });
});

describe("loadPoolConfig", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "agentix-pool-config-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("reads the file named by AGENTIX_POOL_CONFIG, with PORT and POOL_SIGNING_SECRET on top", async () => {
    const file = path.join(dir, "pool.json");
    await writeFile(file, JSON.stringify({ ...minimal, port: 9000 }));
    const config = await loadPoolConfig({
      env: { AGENTIX_POOL_CONFIG: file, PORT: "9100", POOL_SIGNING_SECRET: "from-the-environment-secret" },
    });
    expect(config.port).toBe(9100);
    expect(config.signingKeys).toEqual([{ id: "default", secret: "from-the-environment-secret" }]);
  });

  it("replaces the file's keys with POOL_SIGNING_SECRET and POOL_SIGNING_KEY_ID, or with POOL_SIGNING_KEYS", async () => {
    const file = path.join(dir, "pool-keys.json");
    await writeFile(file, JSON.stringify({ engines: minimal.engines, signingKeys: [KEY_A, KEY_B] }));
    expect((await loadPoolConfig({ path: file, env: {} })).signingKeys).toEqual([KEY_A, KEY_B]);
    const one = await loadPoolConfig({ path: file, env: { POOL_SIGNING_SECRET: "from-the-environment-secret", POOL_SIGNING_KEY_ID: "env-1" } });
    expect(one.signingKeys).toEqual([{ id: "env-1", secret: "from-the-environment-secret" }]);
    const legacyFile = path.join(dir, "pool-legacy.json");
    await writeFile(legacyFile, JSON.stringify(minimal));
    const rotated = await loadPoolConfig({ path: legacyFile, env: { POOL_SIGNING_KEYS: JSON.stringify([KEY_B, KEY_A]) } });
    expect(rotated.signingKeys).toEqual([KEY_B, KEY_A]);
  });

  it("reports ambiguous or malformed signing keys in the environment without echoing them", async () => {
    const env = { POOL_SIGNING_SECRET: "from-the-environment-secret", POOL_SIGNING_KEYS: JSON.stringify([KEY_A]) };
    await expect(loadPoolConfig({ env })).rejects.toThrow(/POOL_SIGNING_SECRET or POOL_SIGNING_KEYS, not both/);
    await expect(loadPoolConfig({ env: { POOL_SIGNING_KEY_ID: "env-1" } })).rejects.toThrow(/POOL_SIGNING_SECRET, which is not set/);
    const garbled = loadPoolConfig({ env: { POOL_SIGNING_KEYS: "[{id: secret-value-here}" } });
    await expect(garbled).rejects.toThrow(/POOL_SIGNING_KEYS is not valid JSON/);
    await expect(garbled).rejects.not.toThrow(/secret-value-here/);
    const tooMany = [KEY_A, KEY_B, { id: "k3", secret: KEY_A.secret }];
    await expect(loadPoolConfig({ env: { POOL_SIGNING_KEYS: JSON.stringify(tooMany) } })).rejects.toThrow(/at most two keys/);
  });

  it("prefers an explicit path and reports unreadable or invalid files", async () => {
    const bad = path.join(dir, "bad.json");
    await writeFile(bad, "{ not json");
    await expect(loadPoolConfig({ path: bad, env: {} })).rejects.toThrow(/not valid JSON/);
    await expect(loadPoolConfig({ path: path.join(dir, "missing.json"), env: {} })).rejects.toThrow(/Cannot read/);
    await expect(loadPoolConfig({ env: { PORT: "eighty" } })).rejects.toThrow(/PORT must be an integer/);
    await expect(loadPoolConfig({ env: {} })).rejects.toThrow(/signingSecret/);
  });
});
