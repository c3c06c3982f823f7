/*
 * `npm run bench:calibrate`: how the simulator's engine compares with published
 * figures, and how many LATS programs per second one simulated engine sustains
 * (Autellix §1's calibration point). Prints plain tables; takes about a minute.
 */

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { formatTable } from "../admin/table.js";
import { isPolicyName, POLICIES, type PolicyName } from "../../sim/des/policies.js";
import { DEFAULT_PROFILE, type EngineProfileName, isEngineProfileName } from "../../sim/profiles.js";
import { loadWorkload } from "../../sim/workload/load.js";
import { type CapacityProbe, type CapacityResult, DEFAULT_CAPACITY_OPTIONS, findCapacity } from "./calibrate-capacity.js";
import { engineCalibration } from "./calibrate-engine.js";
import { measureSpeed, SPEED_RUN, type SpeedRun } from "./calibrate-speed.js";

const USAGE = `npm run bench:calibrate -- [options]

  --profile NAME     engine profile (default ${DEFAULT_PROFILE})
  --seed N           workload seed (default ${DEFAULT_CAPACITY_OPTIONS.seed})
  --window-min N     arrival window of each capacity probe, minutes (default ${DEFAULT_CAPACITY_OPTIONS.windowMs / 60_000})
  --policies LIST    capacity for these policies (default fcfs-rr,agentix)
  --buffer N         also probe agentix with an engine buffer (maxInFlight) of N
  --speed            also time the simulator: 1 simulated hour, 4 engines, mixed workload
  -h, --help`;

/** Autellix §1 (reference/workloads-and-engines.md): one Llama-3.1-8B engine on an A100. */
const AUTELLIX_LATS_PER_SEC = 0.2;
/**
 * H100 SXM over A100 SXM 80 GB: HBM bandwidth 3.35 / 2.04 TB/s (decode-bound steps)
 * and dense bf16 compute 989 / 312 TFLOPS (prefill-bound steps).
 */
const H100_OVER_A100_BANDWIDTH = 3.35 / 2.04;
const H100_OVER_A100_COMPUTE = 989 / 312;

export interface CalibrateOptions {
  profile: EngineProfileName;
  seed: number;
  windowMs: number;
  policies: PolicyName[];
  buffer: number | undefined;
  speed: boolean;
}

export function parseCalibrateArgs(argv: string[]): CalibrateOptions | "help" {
  const { values } = parseArgs({
    args: argv,
    options: {
      profile: { type: "string" },
      seed: { type: "string" },
      "window-min": { type: "string" },
      policies: { type: "string" },
      buffer: { type: "string" },
      speed: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help === true) return "help";
  const profile = values.profile ?? DEFAULT_PROFILE;
  if (!isEngineProfileName(profile)) throw new Error(`--profile: unknown engine profile "${profile}"`);
  const integer = (raw: string | undefined, name: string, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}, got "${raw}"`);
    return n;
  };
  const policies = (values.policies ?? "fcfs-rr,agentix").split(",").map((p) => p.trim());
  for (const p of policies) if (!isPolicyName(p)) throw new Error(`--policies: unknown policy "${p}"`);
  return {
    profile,
    seed: integer(values.seed, "seed", DEFAULT_CAPACITY_OPTIONS.seed, 0),
    windowMs: integer(values["window-min"], "window-min", DEFAULT_CAPACITY_OPTIONS.windowMs / 60_000, 3) * 60_000,
    policies: policies as PolicyName[],
    buffer: values.buffer === undefined ? undefined : integer(values.buffer, "buffer", 0, 1),
    speed: values.speed === true,
  };
}

const sig = (n: number) => (Number.isFinite(n) ? n.toPrecision(3) : "-");

function probeRows(label: string, result: CapacityResult): string[][] {
  return result.probes.map((p: CapacityProbe) => [
    label,
    sig(p.rate),
    String(p.programs),
    `${sig(p.firstThirdMsPerToken)} → ${sig(p.lastThirdMsPerToken)}`,
    String(p.unfinished),
    p.sustained ? "yes" : "no",
    `${(p.wallMs / 1_000).toFixed(1)} s`,
  ]);
}

export async function runCalibrate(argv: string[], out: (text: string) => void, progress: (text: string) => void): Promise<void> {
  const options = parseCalibrateArgs(argv);
  if (options === "help") {
    out(`${USAGE}\n`);
    return;
  }
  const started = performance.now();
  out(`Simulated engine (${options.profile}) measured by driving EngineModel, vs the reference figures\n`);
  out("(/work/shared/reference/workloads-and-engines.md, Llama-3.1-8B on one H100)\n\n");
  const rows = engineCalibration(options.profile);
  out(formatTable(["figure", "simulated", "reference"], rows.map((r) => [r.figure, r.simulated, r.reference])));

  const workload = await loadWorkload("tree-search");
  const windowMin = options.windowMs / 60_000;
  const drainMin = DEFAULT_CAPACITY_OPTIONS.drainMs / 60_000;
  out(`\nSingle-engine capacity for tree-search (LATS) programs: Poisson arrivals for ${windowMin} min (+${drainMin} min to drain), seed ${options.seed}.\n`);
  out(
    `A rate is sustained when every program finishes and the mean normalised latency (ms per generated token) of the last third's arrivals is at most ${DEFAULT_CAPACITY_OPTIONS.growthLimit}× the first third's.\n\n`,
  );
  const runs: { label: string; result: CapacityResult }[] = [];
  const targets: { label: string; policy: PolicyName; buffer?: number }[] = options.policies.map((policy) => ({ label: policy, policy }));
  if (options.buffer !== undefined) targets.push({ label: `agentix, buffer ${options.buffer}`, policy: "agentix", buffer: options.buffer });
  for (const target of targets) {
    const result = findCapacity(workload, {
      ...DEFAULT_CAPACITY_OPTIONS,
      windowMs: options.windowMs,
      seed: options.seed,
      policy: target.policy,
      engineProfile: options.profile,
      ...(target.buffer === undefined ? {} : { maxInFlightPerEngine: target.buffer }),
      onProbe: (p) => progress(`  ${target.label} @ ${sig(p.rate)}/s: ${p.sustained ? "sustained" : "not sustained"} (${(p.wallMs / 1_000).toFixed(1)} s)\n`),
    });
    runs.push({ label: target.label, result });
  }
  out(
    formatTable(
      ["policy", "programs/s", "programs", "ms/token first → last third", "unfinished", "sustained", "wall"],
      runs.flatMap((r) => probeRows(r.label, r.result)),
    ),
  );
  out("\n");
  out(
    formatTable(
      ["policy", "highest sustained (programs/s)", "first failed", "what it is"],
      runs.map(({ label, result }) => [
        label,
        sig(result.sustainedRate),
        result.failedRate === undefined ? "-" : sig(result.failedRate),
        result.maxInFlightPerEngine === undefined ? POLICIES[result.policy].label : `${POLICIES[result.policy].label} with ${result.maxInFlightPerEngine} calls in flight per engine`,
      ]),
    ),
  );
  const fcfs = runs.find((r) => r.result.policy === "fcfs-rr" || r.result.policy === "fcfs-least-loaded") ?? runs[0];
  out(`\nAutellix §1: one Llama-3.1-8B engine on an A100 (vLLM) sustained about ${AUTELLIX_LATS_PER_SEC} LATS programs/s.\n`);
  if (fcfs !== undefined) {
    const ours = fcfs.result.sustainedRate;
    out(
      `Our constants are an H100's, with ~${H100_OVER_A100_BANDWIDTH.toFixed(1)}× an A100's memory bandwidth (decode steps) and ~${H100_OVER_A100_COMPUTE.toFixed(1)}× its bf16 compute (prefill), so an A100 would sustain roughly 1/${H100_OVER_A100_COMPUTE.toFixed(1)}–1/${H100_OVER_A100_BANDWIDTH.toFixed(1)} of our figure: ${fcfs.label}'s ${sig(ours)}/s here is ~${sig(ours / H100_OVER_A100_COMPUTE)}–${sig(ours / H100_OVER_A100_BANDWIDTH)}/s on an A100, against Autellix's ${AUTELLIX_LATS_PER_SEC}/s.\n`,
    );
  }
  if (options.speed) {
    const mixed = await loadWorkload("mixed");
    const { engines, ratePerSec, hours } = SPEED_RUN;
    out(`\nSimulator speed: ${hours} simulated hour, ${engines} engines, mixed workload at ${ratePerSec} programs/s, one core.\n\n`);
    const speeds: SpeedRun[] = [];
    for (const policy of ["fcfs-rr", "agentix"] as const) {
      progress(`  timing ${policy} …\n`);
      speeds.push(measureSpeed(mixed, policy));
    }
    out(
      formatTable(
        ["policy", "programs (finished)", "events", "engines busy", "wall", "CPU", "sim-s per wall-s"],
        speeds.map((s) => [
          s.policy,
          `${s.programs} (${s.finished})`,
          s.events.toLocaleString("en-US"),
          `${(s.busy * 100).toFixed(0)} %`,
          `${s.wallSeconds.toFixed(1)} s`,
          `${s.cpuSeconds.toFixed(1)} s`,
          (s.simSeconds / s.wallSeconds).toFixed(0),
        ]),
      ),
    );
  }
  out(`\nTook ${((performance.now() - started) / 1_000).toFixed(0)} s.\n`);
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (isMain) {
  runCalibrate(
    process.argv.slice(2),
    (text) => process.stdout.write(text),
    (text) => process.stderr.write(text),
  ).catch((error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
