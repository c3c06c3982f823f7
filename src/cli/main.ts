#!/usr/bin/env node
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runAdminCommand } from "./admin.js";
import { runCalibrate } from "./bench/calibrate.js";
import { runProxyBench } from "./bench/proxy-bench.js";
import { runRelayBench } from "./bench/relay-bench.js";
import { runSchedulingBench } from "./bench/scheduling.js";
import { runStart } from "./start.js";

const USAGE = `agentix <command>

  start      run the whole stack locally (edge, pool core, simulated engines)
  admin      tenants, plans, keys and usage export through the edge's admin API
  bench      scheduling policies side by side in the simulator (--workload NAME|FILE)
  bench proxy       added latency and throughput: engine, pool, Portkey, edge
  bench relay       streaming relay throughput: tokens/s one pool core relays, and where it saturates
  bench calibrate   the simulated engine against published figures

Run "agentix <command> --help" for a command's options.`;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

function runBench(argv: string[]): Promise<void> {
  const [what, ...rest] = argv;
  switch (what) {
    case "proxy":
      return runProxyBench(rest);
    case "relay":
      return runRelayBench(rest);
    case "calibrate":
      return runCalibrate(
        rest,
        (text) => process.stdout.write(text),
        (text) => process.stderr.write(text),
      );
    default:
      return runSchedulingBench(argv);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  switch (command) {
    case "start":
      return runStart(rest, root);
    case "admin": {
      const code = await runAdminCommand(rest, {
        stdout: (text) => process.stdout.write(text),
        stderr: (text) => process.stderr.write(text),
        env: process.env,
        cwd: process.cwd(),
      });
      process.exitCode = code;
      return;
    }
    case "bench":
      return runBench(rest);
    case undefined:
    case "help":
    case "--help":
    case "-h":
      console.log(USAGE);
      return;
    default:
      throw new Error(`unknown command "${command}"\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
