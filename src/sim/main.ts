import { parseArgs } from "node:util";
import { startSimEngine } from "./engine-server.js";
import { hostKvTierFor } from "./host-kv-tier.js";
import { KV_LINKS } from "./kv-links.js";
import { DEFAULT_PROFILE, ENGINE_PROFILES, isEngineProfileName } from "./profiles.js";

/*
 * Starts one simulated engine:
 *   tsx src/sim/main.ts --port 9001 --time-scale 10
 * Prints its URL and stops cleanly on SIGINT/SIGTERM.
 */

const USAGE = `usage: tsx src/sim/main.ts [options]
  --port N                  listen port (default 0: any free port)
  --host H                  listen address (default 127.0.0.1)
  --model NAME              served model name (default sim-llama-3.1-8b)
  --profile NAME            ${Object.keys(ENGINE_PROFILES).join(" | ")}
  --time-scale X            model ms per real ms; "inf" = instant (default 1)
  --engine-id ID            name shown in logs
  --fcfs                    first-come first-served instead of priority scheduling
  --max-num-seqs N          sequences per step (default 128)
  --max-batched-tokens N    tokens per step (default 2048)
  --host-kv-gb N            a host-memory KV tier of N GB (10^9 bytes) for this engine (default: none)`;

function fail(message: string): never {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

function positiveNumber(name: string, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (name === "time-scale" && /^(inf|infinity|instant)$/i.test(raw)) return Number.POSITIVE_INFINITY;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) fail(`--${name} must be a positive number, got "${raw}"`);
  return value;
}

async function main(): Promise<void> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: "string" },
        host: { type: "string" },
        model: { type: "string" },
        profile: { type: "string" },
        "time-scale": { type: "string" },
        "engine-id": { type: "string" },
        fcfs: { type: "boolean" },
        "max-num-seqs": { type: "string" },
        "max-batched-tokens": { type: "string" },
        "host-kv-gb": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
    }));
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const profile = values.profile;
  if (profile !== undefined && !isEngineProfileName(profile)) fail(`unknown --profile "${profile}"`);
  const port = values.port === undefined ? 0 : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) fail(`--port must be 0..65535, got "${values.port}"`);

  const hostKvGb = positiveNumber("host-kv-gb", values["host-kv-gb"]);
  const profileName = profile ?? DEFAULT_PROFILE;
  const blockSize = ENGINE_PROFILES[profileName].blockSize;
  const hostTier =
    hostKvGb === undefined
      ? undefined
      : hostKvTierFor(profileName, blockSize, {
          capacityBlocks: Math.max(1, Math.floor((hostKvGb * 1e9) / (blockSize * KV_LINKS[profileName].kvBytesPerToken))),
        });
  const engine = await startSimEngine({
    port,
    host: values.host,
    model: values.model,
    profile,
    engineId: values["engine-id"],
    timeScale: positiveNumber("time-scale", values["time-scale"]),
    priorityScheduling: !values.fcfs,
    maxNumSeqs: positiveNumber("max-num-seqs", values["max-num-seqs"]),
    maxBatchedTokens: positiveNumber("max-batched-tokens", values["max-batched-tokens"]),
    hostTier,
  });
  console.log(`simulated engine ${engine.engineId} (${engine.model.profile.name}, model ${engine.modelName}) at ${engine.url}`);

  const stop = (signal: string) => {
    console.log(`${signal}: stopping ${engine.engineId}`);
    engine.close().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.once("SIGINT", () => stop("SIGINT"));
  process.once("SIGTERM", () => stop("SIGTERM"));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
