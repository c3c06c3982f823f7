import path from "node:path";
import { parseArgs } from "node:util";
import { Header } from "../protocol/headers.js";
import { type LocalStack, startLocalStack } from "./local-stack.js";

const USAGE = `agentix start [options]   start the whole stack on this machine

  --edge-port N     edge Worker port (default 8787)
  --pool-port N     first pool core's port; the others take the next ones (default 8788)
  --pools N         pools, one per region: us-east, eu-west, ap-southeast, us-west (default 2)
  --engines N       simulated engines per pool (default 3)
  --time-scale X    simulated model time per real time (default 1 = real time)
  --prefill N       disaggregated pools: the first N engines of each prefill, the rest decode
                    (default 0: every engine mixed; env AGENTIX_PREFILL_ENGINES)
  --role-controller off|ratio|threshold
                    with --prefill: move engines between prefill and decode as demand shifts
                    (default off; env AGENTIX_ROLE_CONTROLLER)
  --state-dir DIR   local D1, Durable Objects and dev credentials (default .agentix)
  --verbose         show wrangler's output`;

function positiveNumber(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number, got "${raw}"`);
  return value;
}

function nonNegativeInteger(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`--${name} must be a whole number >= 0, got "${raw}"`);
  return value;
}

function roleControllerOf(raw: string | undefined): "off" | "ratio" | "threshold" {
  if (raw === undefined || raw === "" || raw === "off") return "off";
  if (raw === "ratio" || raw === "threshold") return raw;
  throw new Error(`--role-controller must be off, ratio or threshold, got "${raw}"`);
}

function banner(stack: LocalStack): string {
  return `
Agentix is running.
  edge (OpenAI-compatible API)  ${stack.edgeUrl}/v1
${stack.pools
  .map((pool) => `  pool ${pool.id.padEnd(25)}${pool.url}   (${pool.region}; engines ${pool.engines.map((e) => e.url).join("  ")})`)
  .join("\n")}
  pool operator token           ${stack.poolOperatorToken}   (/metrics and /tao/* of every pool)
  dev tenant                    ${stack.tenantId}
  dev API key                   ${stack.devKey}
  admin token                   ${stack.adminToken}

Try it:

curl -s ${stack.edgeUrl}/v1/chat/completions \\
  -H "Authorization: Bearer ${stack.devKey}" \\
  -H "Content-Type: application/json" \\
  -d '{"model":"${stack.model}","messages":[{"role":"user","content":"Plan the next step."}],"max_tokens":32}' -i

# or with the OpenAI SDK (node, ESM):
import OpenAI from "openai";
const client = new OpenAI({ baseURL: "${stack.edgeUrl}/v1", apiKey: "${stack.devKey}" });
const res = await client.chat.completions.create(
  { model: "${stack.model}", messages: [{ role: "user", content: "Plan the next step." }] },
).withResponse();
console.log(res.response.headers.get("${Header.program}"), res.data.usage);
// Pass that program ID back as the "${Header.program}" header to keep one program.

# The first pool's Prometheus metrics (operator token):
curl -s ${stack.poolUrl}/metrics -H "Authorization: Bearer ${stack.poolOperatorToken}"

Ctrl-C stops everything.
`;
}

export async function runStart(argv: string[], root: string): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "edge-port": { type: "string" },
      "pool-port": { type: "string" },
      pools: { type: "string" },
      engines: { type: "string" },
      "time-scale": { type: "string" },
      prefill: { type: "string" },
      "role-controller": { type: "string" },
      "state-dir": { type: "string" },
      verbose: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const stack = await startLocalStack({
    root,
    stateDir: path.resolve(root, values["state-dir"] ?? ".agentix"),
    edgePort: positiveNumber("edge-port", values["edge-port"], 8787),
    poolPort: positiveNumber("pool-port", values["pool-port"], 8788),
    pools: positiveNumber("pools", values.pools, 2),
    engines: positiveNumber("engines", values.engines, 3),
    timeScale: positiveNumber("time-scale", values["time-scale"], 1),
    prefillEngines: nonNegativeInteger("prefill", values.prefill ?? process.env.AGENTIX_PREFILL_ENGINES, 0),
    roleController: roleControllerOf(values["role-controller"] ?? process.env.AGENTIX_ROLE_CONTROLLER),
    log: (line) => console.log(`[agentix] ${line}`),
    ...(values.verbose ? { wranglerLog: (line: string) => console.log(`[wrangler] ${line}`) } : {}),
  });
  console.log(banner(stack));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n[agentix] ${signal}: stopping…`);
    stack.stop().then(
      () => {
        console.log("[agentix] stopped");
        process.exit(0);
      },
      (error: unknown) => {
        console.error("[agentix] error while stopping", error);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}
