import { type EvolvePolicy, type EvolvePoolRules, type EvolveSwitching, percentileOf, simulateEvolvingPool } from "../../sim/evolve/pd-simulation.js";
import { shiftingWorkload } from "../../sim/evolve/workload.js";

/*
 * Throughput after a shift (issue 13's third anchor: Evolving Infra reports, after a
 * shift from math to computer-use work, 2.1× Dynamo's throughput and +28 % over the best
 * fixed split). In the policy table's open-loop runs every policy that keeps up serves
 * the same work, so tokens/s over a run separate only the policies that collapse. Here a
 * policy's throughput is the highest computer-use arrival rate it sustains after a math
 * phase: math agents for half a phase at the bench's math rate (the controllers start
 * from the decode-heavy split and follow it), then computer-use agents at r programs/s
 * for a phase. It sustains r when the computer-use calls that arrive after the phase's
 * first quarter (steady state, past the controllers' reaction) have a P95 TTFT within
 * the target (2 s, the controllers' own) and every computer-use program that arrived
 * before the phase's last quarter answered all its calls by a quarter phase after its
 * end (a queue that grows leaves programs behind; their calls never count in a TTFT). The rate is found by bisection between `LOWEST` and `HIGHEST`, to
 * `RESOLUTION`; the predicate is only nearly monotone (a run is one sample of arrivals),
 * so each rate's verdict is printed with the run that gave it.
 */

export const CAPACITY_TTFT_TARGET_MS = 2_000;
/** The controllers' round before switches overlapped (commit 7d25bf8's default). */
export const ROUND_BEFORE_MS = 10_000;
/** How engines switched then: drain, then switch, looked at every 10 s (the policy table's "before" rows; closer to a planner that adds and removes workers). */
export const DRAINING_SWITCHES: EvolveSwitching = Object.freeze({ roleSwitch: "drain", roundMs: ROUND_BEFORE_MS });
const LOWEST = 1;
const HIGHEST = 8;
const RESOLUTION = 0.125;

export interface CapacityOptions {
  engines: number;
  /** Math programs per second are 4 × rate, as in the policy table. */
  rate: number;
  phaseSeconds: number;
  seed: number;
  /** The pool's decode rules where the run changes them (bench:evolve --max-decodes, --decode-hold-seconds). */
  poolRules?: EvolvePoolRules;
}

export interface CapacityTrial {
  computerUsePerSec: number;
  sustained: boolean;
  /** Steady-state computer-use calls and their P95 TTFT (ms). */
  calls: number;
  p95TtftMs: number;
  /** Computer-use programs that arrived before the phase's last quarter and had not answered every call by the run's end. */
  unfinishedPrograms: number;
  switches: number;
  /** Prefill engines at the last controller round (the split the policy ended on). */
  prefillEnginesAtEnd: number;
}

export interface CapacityRow {
  policy: string;
  /** The highest rate sustained (programs/s), or undefined when not even LOWEST was. */
  sustainedPerSec: number | undefined;
  /** Whether HIGHEST itself was sustained (the true figure is then at least it). */
  atCeiling: boolean;
  trials: CapacityTrial[];
}

/** One run: math, then computer-use agents at `computerUsePerSec`; the verdict on its steady state. */
export function capacityTrial(policy: EvolvePolicy, computerUsePerSec: number, options: CapacityOptions, switching: EvolveSwitching = {}): CapacityTrial {
  const phaseMs = options.phaseSeconds * 1_000;
  const mathMs = phaseMs / 2;
  const settleMs = phaseMs / 4;
  const programs = shiftingWorkload(
    [
      { kind: "math", durationMs: mathMs, programsPerSec: 4 * options.rate },
      { kind: "computer-use", durationMs: phaseMs, programsPerSec: computerUsePerSec },
    ],
    options.seed,
  );
  const result = simulateEvolvingPool({ engines: options.engines, profile: "llama-3.1-8b-h100", programs, policy, maxSimMs: mathMs + phaseMs + settleMs, ...switching, ...options.poolRules });
  const steady = result.calls.filter((c) => c.phase === 1 && c.arrivalMs >= mathMs + settleMs);
  const p95TtftMs = percentileOf(steady.map((c) => c.firstTokenMs - c.arrivalMs), 0.95) ?? Number.NaN;
  const answered = new Map<string, number>();
  for (const call of result.calls) answered.set(call.programId, (answered.get(call.programId) ?? 0) + 1);
  const unfinishedPrograms = programs.filter((p) => p.phase === 1 && p.arrivalMs < mathMs + phaseMs - settleMs && (answered.get(p.id) ?? 0) < p.shape.calls).length;
  const fixedPrefill = policy.kind === "mixed" ? 0 : policy.prefillEngines;
  return {
    computerUsePerSec,
    sustained: unfinishedPrograms === 0 && steady.length > 0 && p95TtftMs <= CAPACITY_TTFT_TARGET_MS,
    calls: steady.length,
    p95TtftMs,
    unfinishedPrograms,
    switches: result.switches.length,
    prefillEnginesAtEnd: result.prefillEnginesByRound.at(-1) ?? fixedPrefill,
  };
}

/** The highest computer-use rate `trial` sustains in [lowest, highest], by bisection to `resolution`. */
export function sustainedRate(trial: (perSec: number) => CapacityTrial, lowest = LOWEST, highest = HIGHEST, resolution = RESOLUTION): Omit<CapacityRow, "policy"> {
  const trials: CapacityTrial[] = [];
  const run = (perSec: number) => {
    const t = trial(perSec);
    trials.push(t);
    return t.sustained;
  };
  if (!run(lowest)) return { sustainedPerSec: undefined, atCeiling: false, trials };
  if (run(highest)) return { sustainedPerSec: highest, atCeiling: true, trials };
  let good = lowest;
  let bad = highest;
  while (bad - good > resolution) {
    const mid = (good + bad) / 2;
    if (run(mid)) good = mid;
    else bad = mid;
  }
  return { sustainedPerSec: good, atCeiling: false, trials };
}

/** Every policy of the policy table (mixed, each fixed split, both controllers from the decode-heavy split, the ratio controller's old cooldown). */
export function runCapacityBench(options: CapacityOptions, start: number, log: (line: string) => void = () => undefined): CapacityRow[] {
  const from = `from ${start}:${options.engines - start}`;
  const policies: [string, EvolvePolicy, EvolveSwitching?][] = [
    ["mixed", { kind: "mixed" }],
    ...Array.from({ length: options.engines - 1 }, (_, i): [string, EvolvePolicy] => [`fixed ${i + 1}:${options.engines - i - 1}`, { kind: "fixed", prefillEngines: i + 1 }]),
    [`threshold (${from})`, { kind: "threshold", prefillEngines: start }],
    // The threshold controller as a Dynamo-like planner switches: drain first, 10 s rounds.
    [`threshold, draining (${from}; drain, 10 s rounds)`, { kind: "threshold", prefillEngines: start }, DRAINING_SWITCHES],
    [`agentix ratio (${from})`, { kind: "ratio", prefillEngines: start }],
    // Its cooldown before 2026-12-05's second round, in the same run.
    [`agentix ratio, 15 s cooldown (${from})`, { kind: "ratio", prefillEngines: start, settings: { cooldownMs: 15_000 } }],
  ];
  return policies.map(([policy, spec, switching]) => {
    const found = sustainedRate((perSec) => {
      const trial = capacityTrial(spec, perSec, options, switching);
      log(`[bench:evolve capacity] ${policy} at ${perSec}/s: ${trial.sustained ? "sustained" : "not sustained"} (P95 TTFT ${(trial.p95TtftMs / 1_000).toFixed(2)} s, ${trial.unfinishedPrograms} unfinished)`);
      return trial;
    });
    return { policy, ...found };
  });
}

const perSec = (row: CapacityRow) => (row.sustainedPerSec === undefined ? `< ${LOWEST}` : `${row.atCeiling ? "≥ " : ""}${row.sustainedPerSec.toFixed(2)}`);

export function formatCapacityReport(rows: readonly CapacityRow[], options: CapacityOptions): string {
  const lines = [
    `Throughput after the shift — ${options.engines} × llama-3.1-8b-h100: math (${4 * options.rate}/s) for ${options.phaseSeconds / 2} s, then computer-use agents at r/s for ${options.phaseSeconds} s; the highest r whose computer-use calls after the first ${options.phaseSeconds / 4} s keep P95 TTFT ≤ ${CAPACITY_TTFT_TARGET_MS / 1_000} s with every program finished (bisection ${LOWEST}–${HIGHEST}/s to ${RESOLUTION}), seed ${options.seed}`,
    "",
    "| policy | sustained computer-use programs/s | calls/s (8 a program) | at that rate: P95 TTFT, switches, prefill engines at the end | first rate not sustained: P95 TTFT | runs |",
    "|---|---|---|---|---|---|",
  ];
  for (const row of rows) {
    const at = row.trials.find((t) => t.sustained && t.computerUsePerSec === row.sustainedPerSec);
    const over = row.trials.filter((t) => !t.sustained).sort((a, b) => a.computerUsePerSec - b.computerUsePerSec)[0];
    const atText = at === undefined ? "—" : `${(at.p95TtftMs / 1_000).toFixed(2)} s, ${at.switches}, ${at.prefillEnginesAtEnd}`;
    const overText = over === undefined ? "—" : `${over.computerUsePerSec.toFixed(2)}/s: ${Number.isFinite(over.p95TtftMs) ? `${(over.p95TtftMs / 1_000).toFixed(2)} s` : "no call"}${over.unfinishedPrograms > 0 ? `, ${over.unfinishedPrograms} unfinished` : ""}`;
    const calls = row.sustainedPerSec === undefined ? "—" : (row.sustainedPerSec * 8).toFixed(1);
    lines.push(`| ${row.policy} | ${perSec(row)} | ${calls} | ${atText} | ${overText} | ${row.trials.length} |`);
  }
  const ratio = rows.find((r) => r.policy.startsWith("agentix"));
  const threshold = rows.find((r) => r.policy.startsWith("threshold ("));
  const draining = rows.find((r) => r.policy.startsWith("threshold, draining"));
  const fixed = rows.filter((r) => r.policy.startsWith("fixed") && r.sustainedPerSec !== undefined);
  const best = fixed.reduce<CapacityRow | undefined>((a, b) => (a === undefined || (b.sustainedPerSec ?? 0) > (a.sustainedPerSec ?? 0) ? b : a), undefined);
  const times = (a: CapacityRow | undefined, b: CapacityRow | undefined) =>
    a?.sustainedPerSec === undefined || b?.sustainedPerSec === undefined ? "—" : `${(a.sustainedPerSec / b.sustainedPerSec).toFixed(2)}×`;
  lines.push(
    "",
    `agentix ÷ best fixed split for this phase (${best?.policy ?? "none"}): ${times(ratio, best)}; agentix ÷ threshold: ${times(ratio, threshold)} (draining, Dynamo-like: ${times(ratio, draining)}); agentix ÷ mixed: ${times(ratio, rows[0])}`,
    "  published, Evolving Infra after the shift: 2.1× Dynamo's throughput, 1.28× the best fixed split's",
  );
  return `${lines.join("\n")}\n`;
}
